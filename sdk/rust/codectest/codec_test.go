// Package codectest holds the Rust SDK's codec (sdk/rust/src/codec.rs) to
// the Go codec, the reference, on the mutated, hostile and random buffers
// of conformance/kit/codeccheck: it builds examples/codec_check natively
// with Debian's cargo and compares verdicts. The SDK's own tests
// (tests/golden.rs) check the golden vectors' values. It has no Go code of
// its own and must never be imported.
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

// checker runs the compiled driver over all records in one process: one
// length-prefixed record after another on stdin, one line each on stdout.
func checker(bin string) codeccheck.Checker {
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
			t.Fatalf("codec_check: %v (a panic is a crash on some buffer)\n%s", err, stderr.Bytes())
		}
		var res []codeccheck.Result
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
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

func TestCodec_AgreesWithGoCodecOnHostileAndRandomBuffers(t *testing.T) {
	codeccheck.Differential(t, "Rust", checker(buildChecker(t)))
}
