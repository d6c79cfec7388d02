;; grow-refused.wat: wasmassign_assign grows memory 16 pages (1 MiB) at a
;; time until memory.grow returns -1, then executes `unreachable`, as a
;; guest's allocator does when it asks for a large block it cannot get.
;;
;; Request: any; the module never reads it. Set a memory limit of whole MiB
;; (without one it grows to 4 GiB).
;; Expected host error: out of memory (wasmruntime.ErrOutOfMemory), because
;; the host refused a memory.grow during the call. Unlike membomb.wat, the
;; trap comes with memory 15 pages below the limit, not at it: memory starts
;; at 1 page and grows by 16, so under a limit of N MiB it stops at 16N-15
;; pages.
(module
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-grow-refused",
  ;; version "1.0.0", protocols ["hostile-grow-refused"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\14\00\00\00hostile-grow-refused\05\00\00\001.0.0\01\00\00\00\14\00\00\00hostile-grow-refused\03\00\21\00\00\00hostile test plugin: grow-refused")

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

  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    (loop $more
      (br_if $more
        (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable)
)
