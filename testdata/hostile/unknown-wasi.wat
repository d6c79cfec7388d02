;; unknown-wasi.wat: imports wasi_snapshot_preview1.sock_open, a function that
;; WASI preview 1 does not have (later WASI proposals do), with the signature
;; those give it. Otherwise a valid module.
;;
;; Request: none: the module is rejected at load.
;; Expected host error: ABI mismatch (wasmruntime.ErrABIMismatch) naming
;; wasi_snapshot_preview1.sock_open, when the module is loaded, not a trap
;; when it is instantiated.
(module
  (import "wasi_snapshot_preview1" "sock_open"
    (func $sock_open (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-unknown-wasi",
  ;; version "1.0.0", protocols ["hostile-unknown-wasi"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\14\00\00\00hostile-unknown-wasi\05\00\00\001.0.0\01\00\00\00\14\00\00\00hostile-unknown-wasi\03\00\21\00\00\00hostile test plugin: unknown-wasi")

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
    (i64.const 0x000000100000006c)) ;; packed: ptr 16, len 108

  ;; Never reached: the host rejects the module at load.
  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    unreachable)
)
