;; table-bomb.wat: wasmassign_assign grows a table of funcref by a million
;; entries (8 MiB of the host's memory in wazero) at a time until table.grow
;; returns -1, then executes `unreachable`. The table declares no maximum, as
;; Go's toolchain writes its own, so nothing in the module stops it before
;; 2^32 entries, 32 GiB.
;;
;; Request: any; the module never reads it.
;; Expected host error: out of memory (wasmruntime.ErrOutOfMemory) in a
;; worker: the table is the worker's memory, which its memory limit holds. In
;; process nothing holds it: never run it in process.
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-table-bomb",
  ;; version "1.0.0", protocols ["hostile-table-bomb"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\12\00\00\00hostile-table-bomb\05\00\00\001.0.0\01\00\00\00\12\00\00\00hostile-table-bomb\03\00\1f\00\00\00hostile test plugin: table-bomb")

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
    (loop $more
      (br_if $more
        (i32.ne (table.grow $t (ref.null func) (i32.const 0x100000)) (i32.const -1))))
    unreachable)
)
