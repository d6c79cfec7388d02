;; garbage-output.wat: wasmassign_assign returns the packed buffer
;; (ptr 0xfffffff0, len 0x20): beyond the end of memory, and ptr+len even
;; overflows 32 bits, which catches a host that adds the two in uint32.
;;
;; Request: any; the module never reads it.
;; Expected host error: invalid output (wasmruntime.ErrInvalidOutput), rule
;; "malformed response" (RuleMalformed): the buffer lies outside guest memory.
;; The host must not trap or panic reading it.
(module
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-garbage-output",
  ;; version "1.0.0", protocols ["hostile-garbage-output"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\16\00\00\00hostile-garbage-output\05\00\00\001.0.0\01\00\00\00\16\00\00\00hostile-garbage-output\03\00#\00\00\00hostile test plugin: garbage-output")

  (func (export "wasmassign_abi_version") (result i32)
    (i32.const 1))

  ;; The request buffer always lives at 4096; alloc grows memory until it fits
  ;; and returns 0 when it cannot (or when size is absurd).
  (func (export "wasmassign_alloc") (param $size i32) (result i32)
    (local $pages i32)
    (if (i32.gt_u (local.get $size) (i32.const 0x7fff0000))
      (then (return (i32.const 0))))
    (local.set $pages
      (i32.shr_u
        (i32.add (local.get $size) (i32.const 69631)) ;; 4096 + 65535: whole pages
        (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 4096))

  (func (export "wasmassign_free") (param i32 i32))

  (func (export "wasmassign_describe") (result i64)
    (i64.const 0x0000001000000072)) ;; packed: ptr 16, len 114

  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    (i64.const 0xfffffff000000020)) ;; packed: ptr 0xfffffff0, len 32
)
