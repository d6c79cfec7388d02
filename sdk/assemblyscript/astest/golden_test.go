// Package astest holds the tests of the AssemblyScript SDK's codec
// (sdk/assemblyscript/assembly): test/golden.wasm, built from test/golden.ts
// by `make as-test`, runs under wazero and is held by
// internal/conformance/kit/codeccheck to the golden vectors of testdata/abi and,
// differentially, to the Go codec on mutated and random buffers. It has no
// Go code of its own and must never be imported.
package astest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmassign/wasmassign/internal/conformance/kit/codeccheck"
)

// goldenWasm is the test module, relative to this package.
const goldenWasm = "../test/golden.wasm"

// loadChecker instantiates test/golden.wasm and returns a Checker over it.
// A missing module fails the test with the command that builds it: tests
// never build wasm themselves.
func loadChecker(t *testing.T) codeccheck.Checker {
	t.Helper()
	wasm, err := os.ReadFile(goldenWasm)
	if err != nil {
		t.Fatalf("sdk/assemblyscript/test/golden.wasm is missing (%v): build it with `make as-test` (npm ci and asc, see sdk/assemblyscript/as.mk)", err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	_, err = rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(_ context.Context, _ api.Module, msg, file, line, col uint32) {
			panic(fmt.Sprintf("abort at line %d col %d", line, col))
		}).Export("abort").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatalf("instantiate golden.wasm: %v", err)
	}
	input, run := mod.ExportedFunction("input"), mod.ExportedFunction("run")
	if input == nil || run == nil {
		t.Fatal("golden.wasm lacks its input or run export")
	}
	// A trap fails the test: the decoder must reject bad input, never
	// crash on it.
	return func(t *testing.T, recs []codeccheck.Record) []codeccheck.Result {
		t.Helper()
		res := make([]codeccheck.Result, len(recs))
		for i, r := range recs {
			out, err := input.Call(ctx, uint64(len(r.B)))
			if err != nil {
				t.Fatalf("record %d: input: %v", i, err)
			}
			if !mod.Memory().Write(uint32(out[0]), r.B) {
				t.Fatalf("record %d: input buffer outside memory", i)
			}
			out, err = run.Call(ctx, uint64(r.Kind), uint64(len(r.B)))
			if err != nil {
				t.Fatalf("record %d (%c, %x): the decoder trapped: %v", i, r.Kind, r.B, err)
			}
			line, ok := mod.Memory().Read(uint32(out[0]>>32), uint32(out[0]))
			if !ok {
				t.Fatalf("record %d: answer outside memory", i)
			}
			verdict, rest, _ := strings.Cut(string(line), " ")
			res[i] = codeccheck.Result{Verdict: verdict, Rest: rest}
		}
		return res
	}
}

func TestCodec_GoldenVectorsDecodeReencodeAndReject(t *testing.T) {
	codeccheck.Golden(t, "AssemblyScript", loadChecker(t))
}

func TestCodec_AgreesWithGoCodecOnHostileAndRandomBuffers(t *testing.T) {
	codeccheck.Differential(t, "AssemblyScript", loadChecker(t))
}
