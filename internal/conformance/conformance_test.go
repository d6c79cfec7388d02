package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/coordinator/handover"
	"github.com/wasmassign/wasmassign/internal/scenario"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// suiteDir is the suite's root, relative to this package.
const suiteDir = "../../testdata/conformance"

// caseFile is one conformance case: a scenario in the simulate format, the
// Kafka test it mirrors, and what the assignor must answer. The scenario is
// kept raw and handed to scenario.Parse, so the suite exercises exactly the
// format users write.
type caseFile struct {
	KafkaTest string          `json:"kafka_test"`
	Scenario  json.RawMessage `json:"scenario"`
	Expect    expectation     `json:"expect"`
	// Pending, when set, says why the case is known to fail for now. The
	// case still runs: a failure is reported as a skip with this reason,
	// and a pass fails, so that the marker is removed once the cause is
	// fixed.
	Pending string `json:"pending"`
}

// expectation is what a case checks. Assignment is exact (members that get
// nothing may be left out); Guarantees name properties for cases whose exact
// output in Kafka depends on Java HashMap iteration order, and for
// generated rounds are checked after every round.
type expectation struct {
	// Assignment is the target the assignor returns.
	Assignment assignment `json:"assignment"`
	// HandedOver is what the members receive after the host withheld the
	// partitions another member still holds (KIP-429).
	HandedOver assignment `json:"handed_over"`
	Guarantees []string   `json:"guarantees"`
	// RackMismatches is how many assigned partitions have no replica on
	// their member's rack, counting only members with a rack, as Kafka's
	// verifyRackAssignment counts them: in the target, or for a
	// cooperative group in the handed-over assignment.
	RackMismatches *int `json:"rack_mismatches"`
}

// assignment maps member id, then topic name, to ascending partitions.
type assignment = map[string]map[string][]int32

// checker checks one guarantee of an assignment.
type checker func(g *group, got *assigned) error

// guarantee returns the checker of a guarantee named in a case file.
func guarantee(name string) (checker, bool) {
	switch name {
	case "valid":
		return checkValid, true
	case "balanced":
		return checkBalanced, true
	case "sticky":
		return checkSticky, true
	case "no_two_cycles":
		return checkNoTwoCycles, true
	}
	return nil, false
}

// caseFiles returns every *.json under the suite, as paths relative to it,
// sorted.
func caseFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(suiteDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".json") {
			rel, err := filepath.Rel(suiteDir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing the conformance suite: %v", err)
	}
	sort.Strings(files)
	return files
}

// loadCase reads a case file strictly, so that a misspelt key fails the case
// instead of silently dropping an expectation.
func loadCase(path string) (*caseFile, *scenario.Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	c, sc, err := parseCase(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, sc, nil
}

func parseCase(data []byte) (*caseFile, *scenario.Scenario, error) {
	var c caseFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("unexpected data after the case object")
	}
	if c.KafkaTest == "" {
		return nil, nil, errors.New("kafka_test: required, name the Kafka @Test this case mirrors")
	}
	if len(c.Scenario) == 0 {
		return nil, nil, errors.New("scenario: required")
	}
	e := &c.Expect
	if e.Assignment == nil && e.HandedOver == nil && len(e.Guarantees) == 0 && e.RackMismatches == nil {
		return nil, nil, errors.New("expect: needs an assignment, handed_over, guarantees or rack_mismatches")
	}
	for _, name := range e.Guarantees {
		if _, ok := guarantee(name); !ok {
			return nil, nil, fmt.Errorf("expect.guarantees: unknown guarantee %q", name)
		}
	}
	sc, err := scenario.Parse(c.Scenario)
	if err != nil {
		return nil, nil, fmt.Errorf("scenario.%w", err)
	}
	if sc.Generate != nil && sc.Generate.Rounds != nil && sc.Generate.Rounds.Count > 1 {
		for key, set := range map[string]bool{"assignment": e.Assignment != nil, "handed_over": e.HandedOver != nil, "rack_mismatches": e.RackMismatches != nil} {
			if set {
				return nil, nil, fmt.Errorf("expect.%s: not allowed with several generate.rounds; only guarantees hold for every round", key)
			}
		}
	}
	return &c, sc, nil
}

func newRegistry(t *testing.T) *wasmruntime.Registry {
	t.Helper()
	ctx := context.Background()
	// The large cases (a million partitions) may take longer than the
	// default per-call deadline on a loaded machine; the suite checks what
	// the assignors answer, and their speed is tracked by the benchmarks.
	cfg := wasmruntime.NewConfig().
		WithCompilationCacheDir(filepath.Join(os.TempDir(), "wasmassign-test-cache")).
		WithLimits(wasmruntime.DefaultLimits().WithTimeout(2 * time.Minute))
	h, err := wasmruntime.NewHost(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	reg := wasmruntime.NewRegistry(h)
	if err := reg.LoadBuiltins(ctx, builtin.FS()); err != nil {
		t.Fatal(err)
	}
	// The suite also covers the custom plugins this repository ships as
	// examples; they are built separately (Rust).
	for _, p := range customPlugins {
		file := filepath.Join(testutil.Root(t), p.file)
		if _, err := os.Stat(file); err != nil {
			t.Fatalf("custom plugin %s: %v (build it with `%s`)", p.file, err, p.build)
		}
		if err := reg.LoadFile(ctx, file); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// customPlugins are loaded besides the built-ins.
var customPlugins = []struct{ file, build string }{
	{"plugins/weighted/weighted.wasm", "make rust-wasm"},
}

// chooseAssignor picks the assignor the way `wasmassign simulate` does
// without --assignor: the scenario's assignor, else the one serving its
// protocol.
func chooseAssignor(reg *wasmruntime.Registry, sc *scenario.Scenario) (*wasmruntime.Assignor, error) {
	if sc.Assignor != "" {
		a, ok := reg.Lookup(sc.Assignor)
		if !ok {
			return nil, fmt.Errorf("assignor %q: no loaded plugin provides it", sc.Assignor)
		}
		return a, nil
	}
	if sc.Protocol == "" {
		return nil, errors.New("the scenario names neither a protocol nor an assignor")
	}
	a, ok := reg.ForProtocol(sc.Protocol)
	if !ok {
		return nil, fmt.Errorf("protocol %q: no loaded plugin serves it", sc.Protocol)
	}
	return a, nil
}

// TestConformance runs every case of the suite through the built-in wasm
// assignors in the sandbox and checks its expectations. A generated case
// with rounds runs each rebalance in turn, feeding what the members received
// back as what they own, and checks the guarantees after every round.
func TestConformance(t *testing.T) {
	files := caseFiles(t)
	if len(files) == 0 {
		t.Fatal("no conformance cases found under " + suiteDir)
	}
	reg := newRegistry(t)
	for _, name := range files {
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			c, sc, err := loadCase(filepath.Join(suiteDir, name))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(name, "-large/") {
				if testing.Short() {
					t.Skip("large case; skipped with -short")
				}
				// A million partitions take seconds each, mostly inside
				// the plugin; running the large cases side by side uses
				// both cores of a small machine.
				t.Parallel()
			}
			skip, errs := verdict(c, runCase(reg, c, sc))
			for _, e := range errs {
				t.Error(e)
			}
			if skip != "" {
				t.Skip(skip)
			}
		})
	}
}

// verdict turns a case's failures into test errors, honouring its pending
// marker: a pending case that fails is skipped with the reason and what
// failed, and one that passes is an error, so the stale marker is noticed.
func verdict(c *caseFile, failures []string) (skip string, errs []string) {
	switch {
	case c.Pending == "":
		return "", failures
	case len(failures) > 0:
		return fmt.Sprintf("pending (%s), mirrors %s:\n%s", c.Pending, c.KafkaTest, strings.Join(failures, "\n")), nil
	}
	return "", []string{fmt.Sprintf("marked pending (%s) but passes now: remove the \"pending\" key", c.Pending)}
}

// runCase runs every round of a case and returns what failed, one message a
// line; it stops at the first round with a failure.
func runCase(reg *wasmruntime.Registry, c *caseFile, sc *scenario.Scenario) []string {
	a, err := chooseAssignor(reg, sc)
	if err != nil {
		return []string{err.Error()}
	}
	if sc.Assignor == "" {
		sc.Assignor = a.Info.Name
	}
	seq, err := sc.Sequence()
	if err != nil {
		return []string{fmt.Sprintf("scenario: %v", err)}
	}
	for {
		round := seq.Scenario()
		where := fmt.Sprintf("%s (mirrors %s)", a.Info.Name, c.KafkaTest)
		if seq.Rounds() > 1 {
			where += fmt.Sprintf(", round %d of %d", seq.Round(), seq.Rounds())
		}
		out, failures := runRound(a, c, round)
		for i := range failures {
			failures[i] = where + ": " + failures[i]
		}
		if len(failures) > 0 {
			return failures
		}
		more, err := seq.Next(out)
		if err != nil {
			return []string{where + ": " + err.Error()}
		}
		if !more {
			return nil
		}
	}
}

// runRound runs one rebalance and checks it.
func runRound(a *wasmruntime.Assignor, c *caseFile, sc *scenario.Scenario) (*scenario.Output, []string) {
	req, _, err := sc.Request()
	if err != nil {
		return nil, []string{fmt.Sprintf("building the request: %v", err)}
	}
	resp, err := a.Assign(context.Background(), req)
	if err != nil {
		return nil, []string{err.Error()}
	}
	if resp.Error != "" {
		return nil, []string{"answered an error: " + resp.Error}
	}
	withheld, _ := handover.Withhold(req, resp)
	out := scenario.NewOutput(req, a.Info.Name, resp, withheld)
	var failures []string
	if c.Expect.Assignment != nil {
		if diff := diffAssignment(normalise(c.Expect.Assignment), normalise(out.Target)); diff != "" {
			failures = append(failures, "assignment differs:\n"+diff)
		}
	}
	if c.Expect.HandedOver != nil {
		if diff := diffAssignment(normalise(c.Expect.HandedOver), normalise(out.Assignment)); diff != "" {
			failures = append(failures, "handed-over assignment differs:\n"+diff)
		}
	}
	if c.Expect.RackMismatches != nil {
		// Kafka counts what its assignor returns: for cooperative-sticky,
		// the assignment after partitions changing owner are removed.
		counted := resp
		if req.RebalanceProtocol == abi.Cooperative {
			counted = withheld
		}
		if got := rackMismatches(req, counted); got != *c.Expect.RackMismatches {
			failures = append(failures, fmt.Sprintf("%d partitions assigned off their member's rack, want %d", got, *c.Expect.RackMismatches))
		}
	}
	g := newGroup(sc)
	target := g.number(out.Target)
	for _, name := range c.Expect.Guarantees {
		check, _ := guarantee(name)
		if err := check(g, target); err != nil {
			failures = append(failures, fmt.Sprintf("not %s: %v", name, err))
		}
	}
	if req.RebalanceProtocol == abi.Cooperative {
		if err := checkHandover(g, target, g.number(out.Assignment)); err != nil {
			failures = append(failures, "cooperative handover: "+err.Error())
		}
	}
	return out, failures
}

// rackMismatches counts the partitions of resp assigned to a member with a
// rack that none of the partition's replicas is on.
func rackMismatches(req *abi.Request, resp *abi.Response) int {
	rackOf := map[int32]string{}
	for _, b := range req.Brokers {
		rackOf[b.ID] = b.Rack
	}
	n := 0
	for _, ma := range resp.Members {
		rack := req.Members[ma.Member].Rack
		if rack == "" {
			continue
		}
		for _, tp := range ma.Partitions {
			parts := req.Topics[tp.Topic].Partitions
			for _, p := range tp.Partitions {
				on := false
				if int(p) < len(parts) {
					for _, b := range req.ReplicaSets[parts[p].Replicas] {
						on = on || rackOf[b] == rack
					}
				}
				if !on {
					n++
				}
			}
		}
	}
	return n
}

// TestSuiteCountMatchesReadme keeps the README honest: adding or removing a
// case without updating the stated count fails.
func TestSuiteCountMatchesReadme(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(suiteDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Scenario count: (\d+)\s*$`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no `Scenario count: N` line")
	}
	want, _ := strconv.Atoi(string(m[1]))
	if got := len(caseFiles(t)); got != want {
		t.Errorf("the suite holds %d scenarios, README.md says %d", got, want)
	}
}

// normalise drops members and topics with no partitions and sorts the
// lists, so that omitted members and `{}` mean the same.
func normalise(a assignment) assignment {
	out := assignment{}
	for member, topics := range a {
		for topic, ps := range topics {
			if len(ps) == 0 {
				continue
			}
			if out[member] == nil {
				out[member] = map[string][]int32{}
			}
			ps = slices.Clone(ps)
			slices.Sort(ps)
			out[member][topic] = ps
		}
	}
	return out
}

// diffAssignment lists, one line per member, where got differs from want.
func diffAssignment(want, got assignment) string {
	members := map[string]bool{}
	for m := range want {
		members[m] = true
	}
	for m := range got {
		members[m] = true
	}
	var lines []string
	for _, m := range slices.Sorted(maps.Keys(members)) {
		w, g := render(want[m]), render(got[m])
		if w != g {
			lines = append(lines, fmt.Sprintf("  %s: want %s, got %s", m, w, g))
		}
	}
	return strings.Join(lines, "\n")
}

func render(topics map[string][]int32) string {
	if len(topics) == 0 {
		return "{}"
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		parts = append(parts, fmt.Sprintf("%s%v", t, topics[t]))
	}
	return strings.Join(parts, " ")
}
