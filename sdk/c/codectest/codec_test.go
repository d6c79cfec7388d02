// Package codectest holds the tests of the C SDK's codec (wasmassign.h,
// wasmassign.c): compiled natively with AddressSanitizer and UBSan, it is
// held by conformance/kit/codeccheck to the golden vectors of testdata/abi
// and, differentially, to the Go codec on mutated and random buffers. It has
// no Go code of its own and must never be imported.
package codectest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/conformance/kit/codeccheck"
)

// buildChecker compiles test/codec_check.c with the SDK natively. gcc is
// on every machine here (/work/shared/TOOLCHAINS.md); a machine without a C
// compiler fails the test rather than skipping it.
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

// nativeChecker runs the compiled checker over all records in one process:
// one length-prefixed record after another on stdin, one line each on
// stdout. A sanitizer report or crash fails the test with its output.
func nativeChecker(bin string) codeccheck.Checker {
	return func(t *testing.T, recs []codeccheck.Record) []codeccheck.Result {
		t.Helper()
		var in bytes.Buffer
		for _, r := range recs {
			in.WriteByte(r.Kind)
			in.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(r.B))))
			in.Write(r.B)
		}
		cmd := exec.Command(bin)
		cmd.Stdin = &in
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("codec_check: %v\n%s", err, stderr.Bytes())
		}
		var res []codeccheck.Result
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			verdict, rest, _ := strings.Cut(sc.Text(), " ")
			res = append(res, codeccheck.Result{Verdict: verdict, Rest: rest})
		}
		if len(res) != len(recs) {
			t.Fatalf("codec_check answered %d of %d records\n%s", len(res), len(recs), stderr.Bytes())
		}
		return res
	}
}

func TestCodec_GoldenVectorsDecodeReencodeAndReject(t *testing.T) {
	codeccheck.Golden(t, "C", nativeChecker(buildChecker(t)))
}

// TestCodec_AgreesWithGoCodecOnHostileAndRandomBuffers: besides agreeing
// with the Go codec, the decoder never reads out of bounds: the sanitizers
// abort the checker if it does.
func TestCodec_AgreesWithGoCodecOnHostileAndRandomBuffers(t *testing.T) {
	codeccheck.Differential(t, "C", nativeChecker(buildChecker(t)))
}
