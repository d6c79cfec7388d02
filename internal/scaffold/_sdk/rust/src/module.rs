//! The module side of the ABI: registration, dispatch, buffers and exports.
//!
//! A plugin registers its assignors with [`plugin!`](crate::plugin), which
//! defines the ABI's exports in the plugin crate (exports of a dependency are
//! not kept by the linker, and 1.63 has no runtime constructors to register
//! from). The exports call into this module.

use crate::codec::{decode_request, encode_description, encode_response};
use crate::model::*;

/// The signature of an assignor: the decoded request in, an assignment or an
/// error message out. An error becomes an error response and the host falls
/// back to the group's fallback assignor. A panic traps (the crate is built
/// with panic=abort); its message is logged at error level first.
pub type AssignFn = fn(&Request) -> Result<Response, String>;

/// One registered assignor: its description and its function. Every field is
/// const, so a plugin lists its assignors in a `static`.
#[derive(Clone, Copy)]
pub struct Assignor {
    /// How operators refer to it; unique within the host.
    pub name: &'static str,
    /// Free form, such as "1.0.0".
    pub version: &'static str,
    /// Client protocol names it answers for; at least one.
    pub protocols: &'static [&'static str],
    /// Eager, cooperative or both.
    pub modes: Modes,
    /// True when it may leave subscribed partitions unassigned on purpose.
    pub may_leave_unassigned: bool,
    /// One line for operators.
    pub description: &'static str,
    /// True when it accepts grouped requests (sdk/ABI.md section 7): its
    /// function then reads [`Request::topic_lists`],
    /// [`Member::subscription`] and owned or previous entries with
    /// [`TopicPartitions::list`]. Leave it false unless the assignor handles
    /// those; [`Member::topics`] is filled either way.
    pub grouped: bool,
    /// The assignment function.
    pub assign: AssignFn,
}

impl Assignor {
    /// Returns the ABI description of this assignor.
    pub fn info(&self) -> AssignorInfo {
        AssignorInfo {
            name: self.name.to_owned(),
            version: self.version.to_owned(),
            protocols: self.protocols.iter().map(|p| (*p).to_owned()).collect(),
            modes: self.modes,
            may_leave_unassigned: self.may_leave_unassigned,
            description: self.description.to_owned(),
            grouped: self.grouped,
        }
    }
}

/// Encodes the description of `assignors` into `out` (cleared first).
pub fn describe(assignors: &[Assignor], out: &mut Vec<u8>) {
    out.clear();
    let d = Description { assignors: assignors.iter().map(Assignor::info).collect() };
    encode_description(&d, out);
}

/// Decodes the request in `input`, runs the assignor it names and encodes the
/// reply into `out` (cleared first). It never fails: a malformed request, an
/// unknown assignor or an assignor error all become error responses.
pub fn dispatch(assignors: &[Assignor], input: &[u8], out: &mut Vec<u8>) {
    let reply = run(assignors, input);
    out.clear();
    encode_response(&reply, out);
}

fn run(assignors: &[Assignor], input: &[u8]) -> Reply {
    let req = decode_request(input).map_err(|e| e.to_string())?;
    let a = lookup(assignors, &req.assignor)?;
    match (a.assign)(&req) {
        Ok(resp) => Ok(resp),
        Err(msg) if msg.is_empty() => Err(format!("assignor {} failed", a.name)),
        Err(msg) => Err(msg),
    }
}

fn lookup<'a>(assignors: &'a [Assignor], name: &str) -> Result<&'a Assignor, String> {
    if name.is_empty() && assignors.len() == 1 {
        return Ok(&assignors[0]);
    }
    assignors
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| format!("this module has no assignor {:?}", name))
}

/// The buffers of one instance. Requests go into host-owned buffers handed
/// out by `alloc`; the largest freed one is kept for the next call, and the
/// response buffer is cleared and reused, so memory stops growing once the
/// instance has served its largest request.
#[doc(hidden)]
pub struct Buffers {
    live: Vec<Vec<u8>>,
    spare: Vec<u8>,
    out: Vec<u8>,
    desc: Vec<u8>,
    hooked: bool,
}

impl Buffers {
    /// An empty set of buffers, for the module's one static.
    pub const fn new() -> Self {
        Buffers { live: Vec::new(), spare: Vec::new(), out: Vec::new(), desc: Vec::new(), hooked: false }
    }

    /// Hands out `size` writable bytes, or `None` when memory is exhausted.
    pub fn alloc(&mut self, size: usize) -> Option<*mut u8> {
        self.hook();
        let mut b = if self.spare.len() >= size {
            std::mem::take(&mut self.spare)
        } else {
            let mut b = Vec::new();
            if b.try_reserve_exact(size).is_err() {
                return None;
            }
            b.resize(size, 0);
            b
        };
        let p = b.as_mut_ptr();
        if self.live.try_reserve(1).is_err() {
            return None;
        }
        self.live.push(b);
        Some(p)
    }

    /// Takes back a buffer from `alloc`; unknown pointers are ignored.
    pub fn free(&mut self, ptr: *const u8) {
        if let Some(i) = self.live.iter().position(|b| b.as_ptr() == ptr) {
            let b = self.live.swap_remove(i);
            if b.len() > self.spare.len() {
                self.spare = b;
            }
        }
    }

    /// Runs the assignment on the `len` bytes at `ptr` and returns the
    /// response bytes, valid until the next call.
    pub fn assign(&mut self, assignors: &[Assignor], ptr: *const u8, len: usize) -> &[u8] {
        self.hook();
        match self.live.iter().position(|b| b.as_ptr() == ptr && len <= b.len()) {
            Some(i) => dispatch(assignors, &self.live[i][..len], &mut self.out),
            None => {
                self.out.clear();
                let msg = "wasmassign_assign: the request buffer was not returned by wasmassign_alloc with at least that size";
                encode_response(&Err(msg.to_owned()), &mut self.out);
            }
        }
        &self.out
    }

    /// Returns the encoded description, built once.
    pub fn describe(&mut self, assignors: &[Assignor]) -> &[u8] {
        self.hook();
        if self.desc.is_empty() {
            describe(assignors, &mut self.desc);
        }
        &self.desc
    }

    /// Installs, on first use, a panic hook that logs the panic message:
    /// with panic=abort the trap itself carries no text.
    fn hook(&mut self) {
        if !self.hooked {
            self.hooked = true;
            std::panic::set_hook(Box::new(|info| {
                crate::log(crate::Level::Error, &format!("panic: {}", info));
            }));
        }
    }
}

/// The one instance-wide state of a plugin. A wasm instance is single
/// threaded and every export runs to completion before the next, so handing
/// out `&mut` from the exports is sound.
#[doc(hidden)]
pub struct Instance(pub std::cell::UnsafeCell<Buffers>);

// SAFETY: wasm32-unknown-unknown instances are single threaded.
unsafe impl Sync for Instance {}

impl Instance {
    /// The empty state.
    pub const fn new() -> Self {
        Instance(std::cell::UnsafeCell::new(Buffers::new()))
    }

    /// Returns the buffers.
    ///
    /// # Safety
    /// Only from an export, which never re-enters another export.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut Buffers {
        &mut *self.0.get()
    }
}

/// Packs a buffer as the ABI's i64: pointer in the upper 32 bits, length in
/// the lower.
#[doc(hidden)]
pub fn pack(b: &[u8]) -> i64 {
    (((b.as_ptr() as usize as u64) << 32) | (b.len() as u64 & 0xffff_ffff)) as i64
}

/// Defines the ABI exports of a plugin module and registers its assignors.
/// Use it once, at the top level of a `cdylib` crate:
///
/// ```ignore
/// fn assign(req: &wasmassign::Request) -> Result<wasmassign::Response, String> { ... }
///
/// wasmassign::plugin! {
///     wasmassign::Assignor {
///         name: "mine",
///         version: "1.0.0",
///         protocols: &["mine"],
///         modes: wasmassign::Modes::BOTH,
///         may_leave_unassigned: false,
///         description: "what it does, in one line",
///         grouped: false,
///         assign,
///     },
/// }
/// ```
#[macro_export]
macro_rules! plugin {
    ($($assignor:expr),+ $(,)?) => {
        static __WASMASSIGN_ASSIGNORS: &[$crate::Assignor] = &[$($assignor),+];
        static __WASMASSIGN_INSTANCE: $crate::module::Instance = $crate::module::Instance::new();

        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmassign_abi_version() -> i32 {
            $crate::VERSION as i32
        }

        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmassign_alloc(size: i32) -> i32 {
            if size <= 0 {
                return 0;
            }
            // SAFETY: exports do not re-enter one another.
            match unsafe { __WASMASSIGN_INSTANCE.get() }.alloc(size as usize) {
                Some(p) => p as usize as i32,
                None => 0,
            }
        }

        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmassign_free(ptr: i32, _size: i32) {
            // SAFETY: exports do not re-enter one another.
            unsafe { __WASMASSIGN_INSTANCE.get() }.free(ptr as usize as *const u8)
        }

        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmassign_describe() -> i64 {
            // SAFETY: exports do not re-enter one another.
            $crate::module::pack(unsafe { __WASMASSIGN_INSTANCE.get() }.describe(__WASMASSIGN_ASSIGNORS))
        }

        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmassign_assign(ptr: i32, len: i32) -> i64 {
            // SAFETY: exports do not re-enter one another.
            let st = unsafe { __WASMASSIGN_INSTANCE.get() };
            $crate::module::pack(st.assign(__WASMASSIGN_ASSIGNORS, ptr as usize as *const u8, len.max(0) as usize))
        }

        /// The assignors this module registers, for native tests of a plugin.
        #[allow(dead_code)]
        pub fn registered_assignors() -> &'static [$crate::Assignor] {
            __WASMASSIGN_ASSIGNORS
        }
    };
}
