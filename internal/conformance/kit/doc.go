// Package kit holds the SDK conformance kit's runner (sdk/KIT.md): a test
// that loads every SDK's kit module (Go, C, AssemblyScript, Rust) through the
// real host and checks that they all behave identically: the codec round
// trip up to a 2,000-member, 1,000,000-partition request, error reporting,
// logging, user data, flat memory, and round robin as the built-in assigns.
//
// The package has no code outside its tests; it exists so that `go test
// ./...` (and therefore `make test`) runs the kit. It must never be imported,
// and its tests load the SDKs' modules as users run them, through the
// runtime, never an SDK's code directly.
//
// Its subpackage codeccheck holds each SDK's codec, run natively or in wasm
// by that SDK's own tests, to the golden vectors and to the Go codec.
package kit
