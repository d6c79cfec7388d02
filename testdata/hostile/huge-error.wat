;; huge-error.wat: returns a well-formed error response (status 1) whose
;; message is 4 MiB of the letter A.
;;
;; Request: any; the module never reads it.
;; Expected host error: assignor error (wasmruntime.ErrAssignorFailed) whose
;; message is cut where the host cuts every guest log line (1 KiB, marked
;; "…(truncated)"), so that the failure does not put 4 MiB into the log.
(module
  ;; 67 pages: the response ends at 131072 + 9 + 4 MiB.
  (memory (export "memory") 67)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-huge-error",
  ;; version "1.0.0", protocols ["hostile-huge-error"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\12\00\00\00hostile-huge-error\05\00\00\001.0.0\01\00\00\00\12\00\00\00hostile-huge-error\03\00\1f\00\00\00hostile test plugin: huge-error")

  ;; The head of the response (sdk/ABI.md section 5) at 131072: version 1,
  ;; status 1 (error), message length 4,194,304; assign writes the message.
  (data (i32.const 131072) "\01\00\00\00\01\00\00\40\00")

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
    (i64.const 0x0000001000000066)) ;; packed: ptr 16, len 102

  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    (local $i i32)
    ;; The message: 524,288 words of eight A's from 131081.
    (loop $fill
      (i64.store
        (i32.add (i32.const 131081) (i32.shl (local.get $i) (i32.const 3)))
        (i64.const 0x4141414141414141))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 524288))))
    (i64.const 0x0002000000400009)) ;; packed: ptr 131072, len 4,194,313
)
