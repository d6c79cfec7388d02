//! A native driver for the SDK's codec, run by sdk/rust/codectest (Go) to
//! hold it to the Go codec on mutated, hostile and random buffers
//! (internal/conformance/kit/codeccheck's Differential).
//!
//! It reads records from stdin, each one byte of kind ('q' request, 'r'
//! response, 'd' description), a little-endian u32 length and that many
//! bytes, and writes one line per record:
//!
//!   ok               decoded, and re-encoding gave back exactly the input
//!   reject <reason>  the decoder rejected the buffer
//!   mismatch         decoded, but re-encoding gave different bytes
//!
//! Buffers in the grouped layout (sdk/ABI.md section 7) are checked like the
//! others. An error response decodes to `Err` whatever its layout and the
//! encoder writes errors plain, which the ABI allows; so an error response
//! that came grouped is compared with its version word put back.

use std::io::{self, BufWriter, Read, Write};

/// The version word of the grouped layout, little-endian.
const GROUPED_WORD: [u8; 4] = (wasmassign::VERSION | wasmassign::GROUPED_LAYOUT).to_le_bytes();

fn main() {
    let mut input = Vec::new();
    io::stdin().read_to_end(&mut input).expect("reading stdin");
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut at = 0;
    while at < input.len() {
        assert!(at + 5 <= input.len(), "truncated record header at byte {}", at);
        let kind = input[at];
        let len = u32::from_le_bytes([input[at + 1], input[at + 2], input[at + 3], input[at + 4]]) as usize;
        at += 5;
        assert!(at + len <= input.len(), "truncated record at byte {}", at);
        let b = &input[at..at + len];
        at += len;
        let mut again = Vec::new();
        let verdict = match kind {
            b'q' => wasmassign::decode_request(b).map(|r| wasmassign::encode_request(&r, &mut again)),
            b'r' => wasmassign::decode_response(b).map(|r| {
                wasmassign::encode_response(&r, &mut again);
                if r.is_err() && b[..4] == GROUPED_WORD {
                    again[..4].copy_from_slice(&GROUPED_WORD);
                }
            }),
            b'd' => wasmassign::decode_description(b).map(|d| wasmassign::encode_description(&d, &mut again)),
            other => panic!("unknown record kind {}", other),
        };
        match verdict {
            Err(e) => writeln!(out, "reject {}", e),
            Ok(()) if again == b => writeln!(out, "ok"),
            Ok(()) => writeln!(out, "mismatch"),
        }
        .expect("writing stdout");
    }
}
