;; error-response.wat: returns a well-formed error response (status 1) with the
;; message "no capacity for group".
;;
;; Request: any; the module never reads it.
;; Expected host error: assignor error (wasmruntime.ErrAssignorFailed) carrying
;; the message "no capacity for group"; the host falls back to the group's
;; fallback assignor. This is not invalid output.
(module
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-error-response",
  ;; version "1.0.0", protocols ["hostile-error-response"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\16\00\00\00hostile-error-response\05\00\00\001.0.0\01\00\00\00\16\00\00\00hostile-error-response\03\00#\00\00\00hostile test plugin: error-response")

  ;; The canned response (sdk/ABI.md section 5), 30 bytes:
  ;; version 1, status 1 (error), message "no capacity for group".
  (data (i32.const 1024) "\01\00\00\00\01\15\00\00\00no capacity for group")

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
    (i64.const 0x000004000000001e)) ;; packed: ptr 1024, len 30
)
