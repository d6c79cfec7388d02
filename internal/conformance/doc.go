// Package conformance holds the conformance suite's runner: a test that runs
// every scenario under testdata/conformance through the built-in wasm
// assignors, inside the sandbox, and checks the answer against the
// expectations stored beside the scenario. The scenarios mirror Kafka's own
// assignor unit tests, so a failure here means a built-in no longer assigns
// as the Java client would. Generated scenarios with rounds (Kafka's
// randomized and large-group tests) run round after round, each fed what the
// members received in the one before, with the guarantees checked every
// round; for cooperative groups the assignment the host hands over after
// withholding (package handover) is checked as well as the target.
//
// The package has no code outside its tests; it exists so that `go test ./...`
// (and therefore `make test`) runs the suite. It must never be imported, and
// its tests must never import the plugins' Go packages directly: the point is
// to test the compiled wasm through the runtime, as users run it.
package conformance
