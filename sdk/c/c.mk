# sdk/c/c.mk: builds the C SDK's conformance kit module. Include it from the
# top-level Makefile (paths are relative to the repository root):
#
#   include sdk/c/c.mk
#
# Targets: c-kit (sdk/c/kit/kit.wasm), c-clean. The toolchain is Debian's
# clang-14 and lld-14 with wasi-libc, which the top-level `tools` target
# installs; c-kit says so when they are missing.

SDK_C_CLANG  ?= clang-14
SDK_C_FLAGS  ?= -O2 -Wall -Wextra -Werror
SDK_C_WASM   := --target=wasm32-wasi -mexec-model=reactor -Wl,--strip-all
SDK_C_KIT    := sdk/c/kit/kit.wasm
SDK_C_SRCS   := sdk/c/wasmassign.c sdk/c/wasmassign.h

.PHONY: c-kit c-clean c-toolcheck

c-kit: $(SDK_C_KIT)

c-toolcheck:
	@command -v $(SDK_C_CLANG) >/dev/null && command -v wasm-ld-14 >/dev/null && [ -e /usr/lib/wasm32-wasi/libc.a ] \
	  || { echo "the C SDK needs clang-14, lld-14 and wasi-libc: run 'make tools' (Debian packages clang-14 lld-14 wasi-libc)" >&2; exit 1; }

$(SDK_C_KIT): sdk/c/kit/kit.c $(SDK_C_SRCS) | c-toolcheck
	$(SDK_C_CLANG) $(SDK_C_WASM) $(SDK_C_FLAGS) -o $@ sdk/c/kit/kit.c sdk/c/wasmassign.c

c-clean:
	rm -f $(SDK_C_KIT)
