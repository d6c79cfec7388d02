// Package codectest holds the Rust SDK's codec (sdk/rust/src/codec.rs) to
// the Go codec, the reference, on the mutated, hostile and random buffers
// of internal/conformance/kit/codeccheck, grouped layout (sdk/ABI.md section 7)
// included: it builds examples/codec_check natively with Debian's cargo and
// compares verdicts. The SDK's own tests
// (tests/golden.rs) check the golden vectors' values. It has no Go code of
// its own and must never be imported.
package codectest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wasmassign/wasmassign/internal/conformance/kit/codeccheck"
)

// cargo is Debian's, which `make rust-tools` installs: the rustup toolchain
// some machines have on PATH lacks what the SDK's Makefile expects.
const cargo = "/usr/bin/cargo"

// buildChecker compiles examples/codec_check and returns its path. A
// machine without cargo fails the test with the command to run.
func buildChecker(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(cargo); err != nil {
		t.Fatalf("the Rust SDK's codec check needs %s: run `make rust-tools`", cargo)
	}
	// The sources are read here so that Go's test cache notices when they
	// change: cargo's reads are invisible to it.
	for _, src := range []string{"../src/codec.rs", "../src/model.rs", "../examples/codec_check.rs"} {
		if _, err := os.ReadFile(src); err != nil {
			t.Fatal(err)
		}
	}
	target := t.TempDir()
	cmd := exec.Command(cargo, "build", "--offline", "-q", "--example", "codec_check", "--target-dir", target)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cargo build --example codec_check: %v\n%s", err, out)
	}
	return filepath.Join(target, "debug", "examples", "codec_check")
}

func TestCodec_AgreesWithGoCodecOnHostileAndRandomBuffersInBothLayouts(t *testing.T) {
	codeccheck.DifferentialGrouped(t, "Rust", codeccheck.Process(buildChecker(t)))
}
