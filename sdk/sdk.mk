# sdk/sdk.mk: the SDKs' build fragments in one include. From the top-level
# Makefile:
#
#   include sdk/sdk.mk
#
# sdk-kits builds the Go, C and AssemblyScript kit modules that
# internal/conformance/kit loads; sdk-test-artefacts builds what the SDKs' own Go tests
# load (the AssemblyScript codec test module). The Rust SDK's kit
# (sdk/rust/kit/kit.wasm) is built by the Rust SDK's own rules.

include sdk/go/kit/kit.mk
include sdk/c/c.mk
include sdk/assemblyscript/as.mk

.PHONY: sdk-kits sdk-test-artefacts sdk-clean

sdk-kits: go-kit c-kit as-kit

sdk-test-artefacts: as-test

sdk-clean: go-kit-clean c-clean as-clean
