// Package codectest holds the tests of the C SDK's codec (wasmassign.h,
// wasmassign.c): compiled natively with AddressSanitizer and UBSan, it is
// held by internal/conformance/kit/codeccheck to the golden vectors of testdata/abi
// and, differentially, to the Go codec on mutated and random buffers. It has
// no Go code of its own and must never be imported.
package codectest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/internal/conformance/kit/codeccheck"
)

// buildChecker compiles test/codec_check.c with the SDK natively ($CC, or
// gcc); a machine without a C compiler fails the test rather than
// skipping it.
func buildChecker(t *testing.T) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Fatalf("the C SDK's codec tests need a native C compiler: %s not found (apt-get install gcc)", cc)
	}
	// The C sources are read here, in the test process, so that Go's test
	// cache notices when they change: the compiler's reads are invisible to it.
	for _, src := range []string{"../test/codec_check.c", "../wasmassign.c", "../wasmassign.h"} {
		if _, err := os.ReadFile(src); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "codec_check")
	args := []string{"-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
		"-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
		"-o", out, "../test/codec_check.c", "../wasmassign.c"}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return out
}

func TestCodec_GoldenVectorsDecodeReencodeAndReject(t *testing.T) {
	codeccheck.Golden(t, "C", codeccheck.Process(buildChecker(t)))
}

// TestCodec_AgreesWithGoCodecOnHostileAndRandomBuffers: besides agreeing
// with the Go codec, the decoder never reads out of bounds: the sanitizers
// abort the checker if it does.
func TestCodec_AgreesWithGoCodecOnHostileAndRandomBuffers(t *testing.T) {
	codeccheck.Differential(t, "C", codeccheck.Process(buildChecker(t)))
}
