;; wasi-wrong-signature.wat: imports wasi_snapshot_preview1.fd_write, which the
;; host provides, as (i32) -> i32 instead of WASI's
;; (fd, iovs, iovs_len, nwritten: i32) -> errno: i32. Otherwise a valid module.
;;
;; Request: none: the module is rejected at load.
;; Expected host error: ABI mismatch (wasmruntime.ErrABIMismatch) naming the
;; import and both signatures, when the module is loaded, not a trap when it
;; is instantiated.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32) (result i32)))
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-wasi-wrong-signature",
  ;; version "1.0.0", protocols ["hostile-wasi-wrong-signature"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\1c\00\00\00hostile-wasi-wrong-signature\05\00\00\001.0.0\01\00\00\00\1c\00\00\00hostile-wasi-wrong-signature\03\00\29\00\00\00hostile test plugin: wasi-wrong-signature")

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
    (i64.const 0x0000001000000084)) ;; packed: ptr 16, len 132

  ;; Never reached: the host rejects the module at load.
  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    unreachable)
)
