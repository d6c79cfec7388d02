# sdk/go/kit/kit.mk: builds the Go SDK's conformance kit module. Include it
# from the top-level Makefile (paths are relative to the repository root):
#
#   include sdk/go/kit/kit.mk
#
# Targets: go-kit (sdk/go/kit/kit.wasm, rebuilt every time; Go's build cache
# makes that cheap), go-kit-clean. Needs only Go.

SDK_GO_KIT := sdk/go/kit/kit.wasm

.PHONY: go-kit go-kit-clean

go-kit:
	cd sdk/go && GOOS=wasip1 GOARCH=wasm $(or $(GO),go) build -buildmode=c-shared -trimpath -o kit/kit.wasm ./kit

go-kit-clean:
	rm -f $(SDK_GO_KIT)
