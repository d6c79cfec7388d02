;; idle-loop.wat: once wasmassign_assign has run on the instance,
;; wasmassign_idle spins forever; before that (the host's idle call while
;; loading) it returns at once. Every assignment reports the idle calls made
;; so far in member 0's user data, as idle-count.wat does.
;;
;; Request: any; member 0 must exist. The answer assigns nothing.
;; Expected host behaviour: every call succeeds; the idle call after it is
;; stopped at the call deadline and the instance discarded (in process
;; isolation, its worker killed), and no caller sees an error.
;;
;; The description sets flag bit 0 ("may leave subscribed partitions
;; unassigned"), so the empty answer is valid.
(module
  (memory (export "memory") 1)
  (global $idles (mut i32) (i32.const 0))
  (global $assigned (mut i32) (i32.const 0))

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-idle-loop",
  ;; version "1.0.0", protocols ["hostile-idle-loop"], modes eager|cooperative, flags 1.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\11\00\00\00hostile-idle-loop\05\00\00\001.0.0\01\00\00\00\11\00\00\00hostile-idle-loop\03\01\1e\00\00\00hostile test plugin: idle-loop")

  ;; The response (sdk/ABI.md section 5), 25 bytes: version 1, status 0 (ok),
  ;; 1 assignment: member 0, no topics, 4 bytes of user data at 1045 that
  ;; assign fills with the idle count.
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
    (i64.const 0x0000001000000063)) ;; packed: ptr 16, len 99

  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    (global.set $assigned (i32.const 1))
    (i32.store (i32.const 1045) (global.get $idles))
    (i64.const 0x0000040000000019)) ;; packed: ptr 1024, len 25

  ;; wasmassign_idle: returns before the first assignment, spins after it.
  (func (export "wasmassign_idle")
    (global.set $idles (i32.add (global.get $idles) (i32.const 1)))
    (if (global.get $assigned)
      (then (loop $forever (br $forever)))))
)
