;; duplicate-members.wat: returns an ok response that gives partition 0 of topic
;; index 0 to member 0 and again to member 1.
;;
;; Request: at least two members (0 and 1), both subscribed to topic index 0,
;; which exists with at least 1 partition.
;; Expected host error: invalid output (wasmruntime.ErrInvalidOutput), rule
;; "partition assigned twice" (RuleDuplicatePartition).
;; The description sets flag bit 0 ("may leave subscribed partitions
;; unassigned"), so the duplicate is the only rule the response breaks.
(module
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-duplicate-members",
  ;; version "1.0.0", protocols ["hostile-duplicate-members"], modes eager|cooperative, flags 1.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\19\00\00\00hostile-duplicate-members\05\00\00\001.0.0\01\00\00\00\19\00\00\00hostile-duplicate-members\03\01&\00\00\00hostile test plugin: duplicate-members")

  ;; The canned response (sdk/ABI.md section 5), 57 bytes:
  ;; version 1, status 0 (ok), 2 assignments: member 0 gets topic 0 partitions [0],
  ;; member 1 gets topic 0 partitions [0], both with empty user data.
  (data (i32.const 1024) "\01\00\00\00\00\02\00\00\00\00\00\00\00\01\00\00\00\00\00\00\00\01\00\00\00\00\00\00\00\00\00\00\00\01\00\00\00\01\00\00\00\00\00\00\00\01\00\00\00\00\00\00\00\00\00\00\00")

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
    (i64.const 0x000000100000007b)) ;; packed: ptr 16, len 123

  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    (i64.const 0x0000040000000039)) ;; packed: ptr 1024, len 57
)
