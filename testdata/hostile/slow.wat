;; slow.wat: wasmassign_assign answers the daemon's smoke test at once and
;; spins forever on every other request, so the module loads, then hangs in
;; a real group's rebalance.
;;
;; Request: the smoke test's is told apart by its group id's length, 21
;; ("wasmassign-smoke-test", the str at offset 4 of the request, sdk/ABI.md
;; section 3). Its answer assigns nothing: the description sets flag bit 0
;; ("may leave subscribed partitions unassigned").
;; Expected host behaviour: the load succeeds; every other call ends with a
;; timeout (wasmruntime.ErrTimeout) at the call deadline, and the daemon's
;; assignment timeout hands the group the range assignment.
(module
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-slow",
  ;; version "1.0.0", protocols ["hostile-slow"], modes eager|cooperative, flags 1.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\0c\00\00\00hostile-slow\05\00\00\001.0.0\01\00\00\00\0c\00\00\00hostile-slow\03\01\19\00\00\00hostile test plugin: slow")

  ;; The smoke test's answer (sdk/ABI.md section 5), 25 bytes: version 1,
  ;; status 0 (ok), 1 assignment: member 0, no topics, 4 bytes of user data.
  (data (i32.const 1024) "\01\00\00\00\00\01\00\00\00\00\00\00\00\00\00\00\00\04\00\00\00\00\00\00\00")

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
    (i64.const 0x0000001000000054)) ;; packed: ptr 16, len 84

  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    (if (i32.eq (i32.load (i32.add (local.get $ptr) (i32.const 4))) (i32.const 21))
      (then (return (i64.const 0x0000040000000019)))) ;; packed: ptr 1024, len 25
    (loop $forever
      (br $forever))
    (i64.const 0))
)
