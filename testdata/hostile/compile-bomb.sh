#!/bin/sh
# compile-bomb.sh writes compile-bomb.wat to stdout: a module that follows the
# ABI and answers every call with an error response, and also holds one
# function that keeps wazero's compiler busy for seconds and takes hundreds of
# MiB. Its point is its size, so it is written by this script rather than
# checked in (some 60 KB of repeated text).
#
# The function declares LOCALS i32 locals and nests DEPTH loops, and the
# innermost loop reads every local. wazero builds SSA form, in which each
# read looks its local up through every enclosing loop header and leaves a
# block parameter at each: LOCALS x DEPTH of them, here 4 million. Measured
# with wazero v1.12 on one core: 2000 x 2000 compiles in about 7 s and maps
# about 700 MiB; doubling both quadruples the time and the memory.
#
# Expected host error, under the tests' limits: deadline exceeded
# (wasmruntime.ErrTimeout) at a compile timeout shorter than that, naming the
# compile; out of memory (wasmruntime.ErrOutOfMemory) in a worker whose memory
# limit is smaller. Under the default limits it loads, slowly.
set -eu
LOCALS=${LOCALS:-2000}
DEPTH=${DEPTH:-2000}

cat <<'WAT'
;; compile-bomb.wat: written by compile-bomb.sh; see that script. Follows the
;; ABI, answers every call with the error response "compile bomb", and holds
;; $bomb, a function that is never called but costs its compiler seconds and
;; hundreds of MiB.
(module
  (memory (export "memory") 1)

  ;; Description (sdk/ABI.md section 4): one assignor named "hostile-compile-bomb",
  ;; version "1.0.0", protocols ["hostile-compile-bomb"], modes eager|cooperative, flags 0.
  (data (i32.const 16) "\01\00\00\00\01\00\00\00\14\00\00\00hostile-compile-bomb\05\00\00\001.0.0\01\00\00\00\14\00\00\00hostile-compile-bomb\03\00!\00\00\00hostile test plugin: compile-bomb")

  ;; The canned response (sdk/ABI.md section 5), 21 bytes:
  ;; version 1, status 1 (error), message "compile bomb".
  (data (i32.const 1024) "\01\00\00\00\01\0c\00\00\00compile bomb")

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
    (i64.const 0x0000040000000015)) ;; packed: ptr 1024, len 21

WAT
awk -v locals="$LOCALS" -v depth="$DEPTH" 'BEGIN {
	printf "  (func $bomb\n    (local"
	for (i = 0; i < locals; i++) printf " i32"
	printf ")\n   "
	for (i = 0; i < depth; i++) printf " loop"
	printf "\n"
	for (i = 0; i < locals; i++) printf "    local.get %d drop\n", i
	printf "   "
	for (i = 0; i < depth; i++) printf " end"
	printf ")\n)\n"
}'
