;; terminal-escape.wat: every text the module gives the host carries terminal
;; escape sequences and other control characters: its assignor's name,
;; version, protocol and description, an extra export's name, the line
;; assign logs and the message of the error response assign returns.
;;
;; Request: any; the module never reads it.
;; Expected host behaviour: loading succeeds (the ABI does not forbid the
;; characters); assign fails with an assignor error (ErrAssignorFailed)
;; carrying the message. Wherever the text reaches a terminal or a log
;; (`wasmassign inspect --format table`, a command's error line, the
;; daemon's text or JSON log) no ESC byte or other control character
;; appears raw; JSON output keeps the text exact.
;;
;; Unlike the other modules, its assignor is not named hostile-<file name>:
;; it is "hostile-terminal-escape" followed by ESC "[31m" (switch to red).
(module
  (import "wasmassign" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named
  ;; "hostile-terminal-escape" ESC "[31m", version "1.0.0" ESC "[0m",
  ;; protocols ["hostile-terminal-escape" ESC "]0;owned" BEL] (sets a
  ;; terminal's title), modes eager|cooperative, flags 0, description
  ;; "hostile test plugin: terminal-escape" ESC "[2J" ESC "[H" CR TAB "forged"
  ;; (clears the screen, moves the cursor home, then a carriage return and a
  ;; tab that would shift a table's columns). 151 bytes.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\1c\00\00\00hostile-terminal-escape\1b[31m\09\00\00\001.0.0\1b[0m\01\00\00\00\21\00\00\00hostile-terminal-escape\1b]0;owned\07\03\00\33\00\00\00hostile test plugin: terminal-escape\1b[2J\1b[H\0d\09forged")

  ;; The line assign logs, 25 bytes: "guest line " ESC "[31mred" ESC "[0m" CR BEL.
  (data (i32.const 512) "guest line \1b[31mred\1b[0m\0d\07")

  ;; The canned response (sdk/ABI.md section 5), 27 bytes: version 1,
  ;; status 1 (error), message "no capacity" ESC "[2J" ESC "[H".
  (data (i32.const 1024) "\01\00\00\00\01\12\00\00\00no capacity\1b[2J\1b[H")

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
    (i64.const 0x0000001000000097)) ;; packed: ptr 16, len 151

  ;; An export the ABI does not use, named "extra" ESC "[5m" (blink).
  (func (export "extra\1b[5m"))

  (func (export "wasmassign_assign") (param $ptr i32) (param $len i32) (result i64)
    (call $log (i32.const 0) (i32.const 512) (i32.const 25)) ;; level 0: info
    (i64.const 0x000004000000001b)) ;; packed: ptr 1024, len 27
)
