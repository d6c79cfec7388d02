;; many-lines.wat: wasmassign_assign writes 100,000 lines of one character
;; ("x\n") to stdout in one WASI fd_write of 200,000 bytes, as a libc does
;; when it flushes a full buffer, then returns an ok response that assigns
;; nothing.
;;
;; Request: any; the module never reads it (its line buffer overwrites it).
;; Expected host behaviour: no error, well within the default call deadline:
;; the host splits the stream into lines in time linear in its size, logs
;; what its log limits allow and drops the rest. The description sets flag
;; bit 0 ("may leave subscribed partitions unassigned"), so the empty
;; response is valid.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 4) ;; room for the 200,000 bytes at 4096

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-many-lines",
  ;; version "1.0.0", protocols ["hostile-many-lines"], modes eager|cooperative, flags 1.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\12\00\00\00hostile-many-lines\05\00\00\001.0.0\01\00\00\00\12\00\00\00hostile-many-lines\03\01\1f\00\00\00hostile test plugin: many-lines")

  ;; The canned response (sdk/ABI.md section 5), 9 bytes:
  ;; version 1, status 0 (ok), no assignments.
  (data (i32.const 1024) "\01\00\00\00\00\00\00\00\00")

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
    ;; 100,000 lines "x\n" at 4096: the i16 0x0a78 is the bytes 'x', '\n'.
    (loop $fill
      (i32.store16
        (i32.add (i32.const 4096) (i32.shl (local.get $i) (i32.const 1)))
        (i32.const 0x0a78))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 100000))))
    ;; One iovec at 2048 over the 200,000 bytes; the count written goes to 2056.
    (i32.store (i32.const 2048) (i32.const 4096))
    (i32.store (i32.const 2052) (i32.const 200000))
    (drop (call $fd_write (i32.const 1) (i32.const 2048) (i32.const 1) (i32.const 2056)))
    (i64.const 0x0000040000000009)) ;; packed: ptr 1024, len 9
)
