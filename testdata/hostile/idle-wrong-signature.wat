;; idle-wrong-signature.wat: exports every function the ABI requires, with the
;; right signatures, and the optional wasmassign_idle as (i32) -> i32 instead
;; of () -> ().
;;
;; Request: never called; loading fails.
;; Expected host error: ABI mismatch (wasmruntime.ErrABIMismatch) naming the
;; export and both signatures.
(module
  (memory (export "memory") 1)
  (func (export "wasmassign_abi_version") (result i32) (i32.const 1))
  (func (export "wasmassign_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmassign_free") (param i32 i32))
  (func (export "wasmassign_describe") (result i64) (i64.const 0))
  (func (export "wasmassign_assign") (param i32 i32) (result i64) (i64.const 0))
  (func (export "wasmassign_idle") (param i32) (result i32) (i32.const 0)))
