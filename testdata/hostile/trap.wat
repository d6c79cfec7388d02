;; trap.wat: wasmassign_assign logs a line at error level through the optional
;; import wasmassign.log, then executes `unreachable`.
;;
;; Request: any; the module never reads it.
;; Expected host error: trap (wasmruntime.ErrTrap). The error should carry the
;; guest's last log line, "about to trap: invariant broken".
(module
  (import "wasmassign" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-trap",
  ;; version "1.0.0", protocols ["hostile-trap"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\0c\00\00\00hostile-trap\05\00\00\001.0.0\01\00\00\00\0c\00\00\00hostile-trap\03\00\19\00\00\00hostile test plugin: trap")

  ;; Log message, 31 bytes.
  (data (i32.const 2048) "about to trap: invariant broken")

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
    (call $log (i32.const 8) (i32.const 2048) (i32.const 31)) ;; level 8 = error
    unreachable)
)
