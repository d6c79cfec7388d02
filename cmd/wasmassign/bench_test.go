package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

func TestBench_MidCasePrintsBothPhasesAsJSON(t *testing.T) {
	code, stdout, stderr := wasmassign(t, "bench", "--case", "mid", "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), stdout)
	}
	keys := []string{"case", "phase", "assignor", "members", "partitions", "wasm_ms", "native_ms", "native", "ratio", "moved", "plugin_native_ms", "sandbox", "wasm_peak_memory_mib"}
	for i, phase := range []string{"initial", "rejoin"} {
		var raw map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &raw); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, lines[i])
		}
		for _, k := range keys {
			if _, ok := raw[k]; !ok {
				t.Errorf("line %d: no key %q", i, k)
			}
		}
		var r struct {
			Case, Phase, Assignor, Native string
			Members, Partitions, Moved    int
			WasmMS                        float64 `json:"wasm_ms"`
			NativeMS                      float64 `json:"native_ms"`
			Ratio                         float64
			PluginMS                      float64 `json:"plugin_native_ms"`
			Sandbox                       float64
			PeakMiB                       float64 `json:"wasm_peak_memory_mib"`
		}
		json.Unmarshal([]byte(lines[i]), &r)
		if r.Phase != phase || r.Case != "mid" || r.Assignor != "cooperative-sticky" || r.Native != "kgo" {
			t.Errorf("line %d: %+v, want case mid, phase %s, cooperative-sticky vs kgo", i, r, phase)
		}
		if r.Members != 100 || r.Partitions != 25000 {
			t.Errorf("line %d: %d members, %d partitions; want 100 and 25000", i, r.Members, r.Partitions)
		}
		// A Go guest's linear memory starts at a few MiB; the sandbox's
		// limit for the benchmark is 4 GiB.
		if r.PeakMiB < 1 || r.PeakMiB > 4096 {
			t.Errorf("line %d: peak memory %v MiB, want a plugin instance's size", i, r.PeakMiB)
		}
		if r.WasmMS <= 0 || r.NativeMS <= 0 {
			t.Errorf("line %d: times %v and %v, want both positive", i, r.WasmMS, r.NativeMS)
		}
		// Times are rounded to the microsecond and the ratio to 1/1000.
		if want := r.WasmMS / r.NativeMS; math.Abs(r.Ratio-want) > 0.001+want*(0.0005/r.NativeMS+0.0005/r.WasmMS) {
			t.Errorf("line %d: ratio %v, want wasm_ms/native_ms = %v", i, r.Ratio, want)
		}
		// A built-in also runs natively, for the sandbox's own cost. The
		// times are rounded to the microsecond, which for a native run of a
		// few hundred microseconds moves the ratio by up to ~0.5%.
		if want := r.WasmMS / r.PluginMS; r.PluginMS <= 0 || math.Abs(r.Sandbox-want) > 0.001+want*(0.001+0.0005/r.PluginMS+0.0005/r.WasmMS) {
			t.Errorf("line %d: sandbox %v with native plugin %v ms, want wasm_ms/plugin_native_ms", i, r.Sandbox, r.PluginMS)
		}
		if r.Moved < 0 || r.Moved > r.Partitions {
			t.Errorf("line %d: moved %d of %d partitions", i, r.Moved, r.Partitions)
		}
	}
}

func TestBench_BadUsageExits2NamingTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		flag string
	}{
		{[]string{"--case", "no-such-case"}, "--case"},
		{[]string{"--compare", "sarama"}, "--compare"},
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--case", "mid", "--assignor", "no-such-assignor"}, "--assignor"},
		{[]string{"--case", "mid", "--scenario", "testdata/scenarios/range-basic.json"}, "--scenario"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := wasmassign(t, append([]string{"bench"}, tt.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr, tt.flag) {
				t.Errorf("stderr does not name %s:\n%s", tt.flag, stderr)
			}
		})
	}
}

func TestBench_ScenarioFileIsAOnePhaseCase(t *testing.T) {
	path := testutil.Artefact(t, "testdata/scenarios/range-basic.json")
	code, stdout, stderr := wasmassign(t, "bench", "--scenario", path, "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(lines), stdout)
	}
	var r struct {
		Case, Phase, Assignor string
		Members, Partitions   int
	}
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	// range-basic.json: protocol range, two members, two topics of three.
	if r.Case != "range-basic" || r.Phase != "initial" || r.Assignor != "range" || r.Members != 2 || r.Partitions != 6 {
		t.Errorf("got %+v", r)
	}
}

func TestBench_TableNamesBothSides(t *testing.T) {
	code, stdout, stderr := wasmassign(t, "bench", "--scenario", testutil.Artefact(t, "testdata/scenarios/range-basic.json"), "--runs", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"range-basic", "initial", "wasm", "kgo"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

func TestBench_AssignorWithoutKgoTwinIsComparedWithKgoRange(t *testing.T) {
	code, stdout, stderr := wasmassign(t, "bench", "--case", "heterogeneous", "--assignor", "leader-rack-range", "--runs", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "comparing with kgo's range") || !strings.Contains(stdout, "leader-rack-range") {
		t.Errorf("stdout %q\nstderr %q", stdout, stderr)
	}
}

func TestBench_CompareWithANamedKgoBalancer(t *testing.T) {
	code, stdout, stderr := wasmassign(t, "bench", "--case", "churn", "--assignor", "leader-rack-range", "--compare", "kgo:roundrobin", "--runs", "1", "--json")
	if code != 0 || strings.Contains(stderr, "note:") || !strings.Contains(stdout, `"native":"kgo"`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := wasmassign(t, "bench", "--compare", "kgo:nope"); code != 2 || !strings.Contains(stderr, "--compare") {
		t.Errorf("kgo:nope: exit %d, stderr %q", code, stderr)
	}
}
