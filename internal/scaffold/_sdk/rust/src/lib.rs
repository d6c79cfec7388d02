//! Write wasmassign assignor plugins in Rust.
//!
//! This crate implements ABI version 1 (sdk/ABI.md) for
//! `wasm32-unknown-unknown` with no dependencies and no WASI: the module's
//! only import is the host's `wasmassign.log`, and only when the plugin logs.
//! It provides the typed models ([`Request`], [`Response`], [`Description`]),
//! the codec in both directions ([`decode_request`], [`encode_response`],
//! ...), one registration point ([`plugin!`]), error reporting (an assignor
//! returns `Err(message)`), host logging ([`log`]) and the module's buffers,
//! which are reused so memory stays flat across calls. It speaks the grouped
//! layout of section 7 too, for assignors that declare it
//! ([`Assignor::grouped`]).
//!
//! A plugin is a `cdylib` crate built with
//! `cargo build --release --target wasm32-unknown-unknown` and
//! `panic = "abort"`. Randomness must come from [`Request::seed`]; there is no
//! other source in the sandbox.

mod codec;
mod model;
#[doc(hidden)]
pub mod module;

pub use codec::{
    decode_description, decode_request, decode_response, encode_description, encode_request, encode_response,
    DecodeError, GROUPED_LAYOUT, VERSION,
};
pub use model::*;
pub use module::{dispatch, AssignFn, Assignor};

/// The severity of a log line, with the values of Go's log/slog that the
/// host expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    /// Detail for plugin authors.
    Debug = -4,
    /// Normal operation.
    Info = 0,
    /// Something an operator may want to look at.
    Warn = 4,
    /// Something failed.
    Error = 8,
}

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "wasmassign")]
extern "C" {
    #[link_name = "log"]
    fn host_log(level: i32, ptr: *const u8, len: i32);
}

/// Writes one line to the host's log, attributed to this plugin. The host
/// caps log volume per call and per second and counts what it drops. Outside
/// wasm (native tests) the line goes to stderr.
pub fn log(level: Level, msg: &str) {
    if msg.is_empty() {
        return;
    }
    #[cfg(target_arch = "wasm32")]
    // SAFETY: the host reads len bytes at ptr, which msg holds.
    unsafe {
        host_log(level as i32, msg.as_ptr(), msg.len() as i32)
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{:?}: {}", level, msg);
}
