# Rust SDK build fragment. Include it from the main Makefile:
#
#   include sdk/rust/rust.mk
#
# then make `test` depend on rust-wasm (internal/conformance/kit and plugins/weighted
# load the .wasm files) and rust-test, and `clean` on rust-clean.
# It installs Debian's rustc 1.63 with the wasm32 std when missing (the rustup
# Rust that machines have on PATH has no wasm target), builds the Rust SDK's
# kit module, the weighted plugin and the built-in sticky plugin (for
# `make build`, so build depends on rust-tools), and runs their native tests.
# Cargo never reaches the network (--offline): the crates have no
# dependencies beyond the SDK's path.

RUST_APT_PKGS := rustc cargo libstd-rust-dev-wasm32
# Debian's toolchain lives in /usr/bin and must win over ~/.cargo/bin.
RUST_ENV      := PATH=/usr/bin:$$PATH
RUST_CARGO    := $(RUST_ENV) cargo
RUST_WASM     := build --offline --release --target wasm32-unknown-unknown
RUST_OUT      := target/wasm32-unknown-unknown/release
RUST_WASM_FILES := sdk/rust/kit/kit.wasm plugins/weighted/weighted.wasm
# The built-in sticky and cooperative-sticky plugin is Rust (for the
# sandbox's cost, RATIONALE.md); package plugins/sticky stays the Go reference, and its
# differential test holds the two to identical answers. So are range,
# roundrobin and leader-rack-range (for a worker's footprint), on the port of
# plugins/internal/groupview; plugins/builtin's differential test holds them to
# their Go packages.
STICKY_CRATE  := plugins/sticky/rust
RUST_BUILTIN_CRATES := plugins/range/rust plugins/roundrobin/rust plugins/leaderrack/rust
GROUPVIEW_CRATE := plugins/internal/groupview/rust

.PHONY: rust rust-tools rust-wasm rust-test rust-clean

## rust: the Rust SDK's wasm artefacts and its tests.
rust: rust-wasm rust-test

## rust-tools: Debian's rustc, cargo and wasm32 std, installed when missing.
rust-tools:
	@if [ ! -x /usr/bin/cargo ] || [ ! -x /usr/bin/rustc ] \
	   || [ ! -d /usr/lib/rustlib/wasm32-unknown-unknown/lib ]; then \
	  echo "installing $(RUST_APT_PKGS)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(RUST_APT_PKGS) >/dev/null; \
	fi

rust-wasm: $(RUST_WASM_FILES)

# FORCE: cargo decides what is stale; the copy keeps the file's mtime honest.
sdk/rust/kit/kit.wasm: rust-tools FORCE
	cd sdk/rust/kit && $(RUST_CARGO) $(RUST_WASM)
	cp sdk/rust/kit/$(RUST_OUT)/wasmassign_kit.wasm $@

plugins/weighted/weighted.wasm: rust-tools FORCE
	cd plugins/weighted && $(RUST_CARGO) $(RUST_WASM)
	cp plugins/weighted/$(RUST_OUT)/weighted.wasm $@

plugins/builtin/wasm/sticky.wasm: rust-tools FORCE
	cd $(STICKY_CRATE) && $(RUST_CARGO) $(RUST_WASM)
	cp $(STICKY_CRATE)/$(RUST_OUT)/sticky.wasm $@

plugins/builtin/wasm/range.wasm plugins/builtin/wasm/roundrobin.wasm plugins/builtin/wasm/leaderrack.wasm: plugins/builtin/wasm/%.wasm: rust-tools FORCE
	cd plugins/$*/rust && $(RUST_CARGO) $(RUST_WASM)
	cp plugins/$*/rust/$(RUST_OUT)/$*.wasm $@

## rust-test: the SDK's codec against testdata/abi, and the Rust plugins' unit tests
## (weighted, the built-in sticky crate, the groupview port), natively.
rust-test: rust-tools
	cd sdk/rust && $(RUST_CARGO) test --offline -q
	cd sdk/rust/kit && $(RUST_CARGO) test --offline -q
	cd plugins/weighted && $(RUST_CARGO) test --offline -q
	cd $(STICKY_CRATE) && $(RUST_CARGO) test --offline -q
	cd $(GROUPVIEW_CRATE) && $(RUST_CARGO) test --offline -q

## rust-clean: cargo's build directories and the copied .wasm files.
rust-clean:
	rm -rf sdk/rust/target sdk/rust/kit/target plugins/weighted/target $(STICKY_CRATE)/target $(GROUPVIEW_CRATE)/target $(RUST_BUILTIN_CRATES:%=%/target) $(RUST_WASM_FILES)
