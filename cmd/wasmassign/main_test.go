package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/testutil"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// TestMain first serves as a plugin worker when a host of this test binary
// started it. Otherwise it shares one compilation cache among the tests, so
// each command loads the built-ins in milliseconds instead of compiling them
// again.
func TestMain(m *testing.M) {
	wasmruntime.RunWorkerIfRequested()
	loadtest.ServeKfakeIfRequested()
	os.Exit(testutil.RunWithCompileCache(m, "WASMASSIGN_CACHE_DIR"))
}

// wasmassign runs the command in-process and returns its exit code and output.
func wasmassign(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type simOutput struct {
	Assignor          string                        `json:"assignor"`
	RebalanceProtocol string                        `json:"rebalance_protocol"`
	Target            map[string]map[string][]int32 `json:"target"`
	Assignment        map[string]map[string][]int32 `json:"assignment"`
	UserData          map[string]string             `json:"user_data"`
}

func simulateJSON(t *testing.T, args ...string) simOutput {
	t.Helper()
	code, stdout, stderr := wasmassign(t, append([]string{"simulate", "--format", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out simOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	return out
}

// The example of KAFKA-SEMANTICS.md: two consumers, two topics of three
// partitions; range gives the first consumer two of each.
const rangeExample = `{
  "protocol": "range",
  "topics": [{"name": "t0", "partition_count": 3}, {"name": "t1", "partition_count": 3}],
  "members": [{"id": "c1", "topics": ["t0", "t1"]}, {"id": "c0", "topics": ["t0", "t1"]}]
}`

func TestSimulate_RangeMatchesKafkaExample(t *testing.T) {
	out := simulateJSON(t, "--scenario", writeScenario(t, rangeExample))
	want := map[string]map[string][]int32{
		"c0": {"t0": {0, 1}, "t1": {0, 1}},
		"c1": {"t0": {2}, "t1": {2}},
	}
	if !equalAssignment(out.Target, want) || !equalAssignment(out.Assignment, want) {
		t.Fatalf("target %v, assignment %v; want both %v", out.Target, out.Assignment, want)
	}
	if out.Assignor != "range" || out.RebalanceProtocol != "eager" {
		t.Fatalf("assignor %q, rebalance protocol %q", out.Assignor, out.RebalanceProtocol)
	}
}

func TestSimulate_AssignorFlagOverridesProtocol(t *testing.T) {
	out := simulateJSON(t, "--scenario", writeScenario(t, rangeExample), "--assignor", "roundrobin")
	// Round-robin over sorted partitions t0-0, t0-1, t0-2, t1-0, ... alternates
	// c0 and c1 across the topic boundary.
	want := map[string]map[string][]int32{
		"c0": {"t0": {0, 2}, "t1": {1}},
		"c1": {"t0": {1}, "t1": {0, 2}},
	}
	if out.Assignor != "roundrobin" || !equalAssignment(out.Target, want) {
		t.Fatalf("assignor %q target %v, want roundrobin %v", out.Assignor, out.Target, want)
	}
}

func TestSimulate_CooperativeWithholdsPartitionsOthersStillOwn(t *testing.T) {
	scenario := `{
  "protocol": "cooperative-range", "assignor": "range", "generation": 4,
  "topics": [{"name": "t", "partition_count": 4}],
  "members": [
    {"id": "a", "topics": ["t"], "owned": {"t": [0, 1, 2, 3]}, "generation": 3},
    {"id": "b", "topics": ["t"]}
  ]
}`
	out := simulateJSON(t, "--scenario", writeScenario(t, scenario))
	if out.RebalanceProtocol != "cooperative" {
		t.Fatalf("rebalance protocol %q, want cooperative from the protocol name", out.RebalanceProtocol)
	}
	if got := out.Target["b"]["t"]; len(got) != 2 {
		t.Fatalf("target for b: %v, want two partitions", got)
	}
	if got := out.Assignment["b"]; len(got) != 0 {
		t.Fatalf("b receives %v while a still owns everything; want nothing this round", got)
	}
	if !equalAssignment(map[string]map[string][]int32{"a": out.Assignment["a"]}, map[string]map[string][]int32{"a": out.Target["a"]}) {
		t.Fatalf("a's assignment %v differs from its target %v", out.Assignment["a"], out.Target["a"])
	}
}

func TestSimulate_OwnedPartitionsOfDeletedTopicWarn(t *testing.T) {
	scenario := `{
  "protocol": "range",
  "topics": [{"name": "t", "partition_count": 2}],
  "members": [{"id": "a", "topics": ["t"], "owned": {"gone": [0]}, "generation": 1}]
}`
	code, stdout, stderr := wasmassign(t, "simulate", "--scenario", writeScenario(t, scenario))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "warning") || !strings.Contains(stderr, "gone") {
		t.Fatalf("no warning naming the deleted topic on stderr: %q", stderr)
	}
	var out simOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if want := map[string]map[string][]int32{"a": {"t": {0, 1}}}; !equalAssignment(out.Assignment, want) {
		t.Fatalf("assignment %v, want %v", out.Assignment, want)
	}
}

func TestSimulate_TableFormat(t *testing.T) {
	code, stdout, stderr := wasmassign(t, "simulate", "--format", "table", "--scenario", writeScenario(t, rangeExample))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"c0", "c1", "t0[0-1]", "t1[2]"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

func TestSimulate_SVGFormatDrawsEveryPartition(t *testing.T) {
	code, stdout, stderr := wasmassign(t, "simulate", "--format", "svg", "--scenario", writeScenario(t, rangeExample))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := xml.Unmarshal([]byte(stdout), new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	// The example has six partitions, t0 and t1 with three each.
	if n := strings.Count(stdout, "<rect "); n != 6 {
		t.Errorf("%d cells, want 6:\n%s", n, stdout)
	}
}

func TestSimulate_BadInputExitsTwoWithOneLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no scenario", []string{"simulate"}, "--scenario is required"},
		{"bad format", []string{"simulate", "--scenario", "x.json", "--format", "xml"}, `--format: "xml"`},
		{"missing file", []string{"simulate", "--scenario", "/nonexistent/s.json"}, "/nonexistent/s.json"},
		{"duplicate member", []string{"simulate", "--scenario", testutil.Artefact(t, "testdata/scenarios/invalid/duplicate-member.json")}, "members[1].id"},
		{"unknown assignor", []string{"simulate", "--scenario", writeScenario(t, rangeExample), "--assignor", "nope"}, `assignor "nope"`},
		{"unknown flag", []string{"simulate", "--bogus"}, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := wasmassign(t, tt.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}
			last := strings.TrimSpace(stderr)
			if i := strings.LastIndexByte(last, '\n'); i >= 0 && tt.name != "unknown flag" {
				t.Fatalf("more than one line on stderr:\n%s", stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Fatalf("stderr %q does not name %q", stderr, tt.want)
			}
		})
	}
}

func TestSimulate_HostilePluginsFailWithTypedMessage(t *testing.T) {
	scenario := writeScenario(t, `{
  "topics": [{"name": "t0", "partition_count": 2}, {"name": "t1", "partition_count": 1}],
  "members": [{"id": "m0", "topics": ["t0"]}, {"id": "m1", "topics": ["t0", "t1"]}]
}`)
	tests := []struct {
		file, want string
	}{
		{"trap.wasm", "trap"},
		{"loop.wasm", "deadline exceeded"},
		{"membomb.wasm", "out of memory"},
		{"bad-partition.wasm", "invalid output: partition does not exist"},
		{"duplicate.wasm", "invalid output: partition assigned twice"},
		{"unsubscribed.wasm", "invalid output: topic not subscribed"},
		{"wrong-abi.wasm", "ABI mismatch"},
		{"not-wasm.wasm", "not a wasm module"},
		{"startloop.wasm", "deadline exceeded"},
		{"error-response.wasm", "no capacity for group"},
	}
	// The deadline also bounds instantiating the built-ins, which takes a
	// few hundred milliseconds on a loaded two-core machine.
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			plugin := testutil.Artefact(t, filepath.Join("testdata/hostile", tt.file))
			assignor := "hostile-" + strings.TrimSuffix(tt.file, ".wasm")
			code, _, stderr := wasmassign(t, "simulate", "--scenario", scenario, "--plugin", plugin,
				"--assignor", assignor, "--timeout", "1s", "--memory-limit-mb", "16")
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, tt.file) {
				t.Fatalf("stderr %q does not name %q and the file", stderr, tt.want)
			}
		})
	}
}

func TestSimulate_PluginDirWithTwoFilesClaimingOneName(t *testing.T) {
	dir := t.TempDir()
	src := testutil.ReadArtefact(t, "testdata/hostile/trap.wasm")
	for _, name := range []string{"a.wasm", "b.wasm"} {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := wasmassign(t, "simulate", "--scenario", writeScenario(t, rangeExample), "--plugin-dir", dir)
	if code == 0 || !strings.Contains(stderr, "a.wasm") || !strings.Contains(stderr, "b.wasm") {
		t.Fatalf("exit %d, stderr %q: want a failure naming both files", code, stderr)
	}
}

func TestSimulate_PluginFileReplacesBuiltin(t *testing.T) {
	// The C guest's assignor is c-roundrobin; it does not replace anything,
	// but serves its own protocol name when asked for.
	out := simulateJSON(t, "--scenario", writeScenario(t, rangeExample), "--plugin",
		testutil.Artefact(t, "testdata/guests/c/roundrobin.wasm"), "--assignor", "c-roundrobin")
	builtin := simulateJSON(t, "--scenario", writeScenario(t, rangeExample), "--assignor", "roundrobin")
	if !equalAssignment(out.Target, builtin.Target) {
		t.Fatalf("C round-robin %v differs from the built-in %v", out.Target, builtin.Target)
	}
}

func TestInspect_JSONKeys(t *testing.T) {
	code, stdout, stderr := wasmassign(t, "inspect", "--format", "json", testutil.Artefact(t, "plugins/builtin/wasm/range.wasm"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"abi_version", "assignors", "imports", "exports", "size_bytes", "compile_ms"} {
		if _, ok := got[key]; !ok {
			t.Errorf("missing key %q in %s", key, stdout)
		}
	}
	assignors, _ := got["assignors"].([]any)
	if len(assignors) != 1 {
		t.Fatalf("assignors = %v, want one", got["assignors"])
	}
	a := assignors[0].(map[string]any)
	for _, key := range []string{"name", "version", "rebalance_protocols", "description"} {
		if _, ok := a[key]; !ok {
			t.Errorf("assignor lacks %q: %v", key, a)
		}
	}
	if a["name"] != "range" || got["abi_version"] != float64(1) {
		t.Fatalf("name %v, abi_version %v", a["name"], got["abi_version"])
	}
}

func TestInspect_RejectsBrokenModules(t *testing.T) {
	for _, file := range []string{"not-wasm.wasm", "wrong-abi.wasm", "bad-import.wasm", "unknown-wasi.wasm", "wasi-wrong-signature.wasm"} {
		code, _, stderr := wasmassign(t, "inspect", testutil.Artefact(t, filepath.Join("testdata/hostile", file)))
		if code != 1 || !strings.Contains(stderr, file) {
			t.Errorf("%s: exit %d, stderr %q", file, code, stderr)
		}
	}
}

func equalAssignment(a, b map[string]map[string][]int32) bool {
	norm := func(m map[string]map[string][]int32) string {
		clean := make(map[string]map[string][]int32)
		for member, topics := range m {
			clean[member] = make(map[string][]int32)
			for t, ps := range topics {
				if len(ps) > 0 {
					clean[member][t] = ps
				}
			}
		}
		b, _ := json.Marshal(clean)
		return string(b)
	}
	return norm(a) == norm(b)
}
