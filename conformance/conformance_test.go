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

	"github.com/wasmassign/wasmassign/plugins/builtin"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/scenario"
)

// suiteDir is the suite's root, relative to this package.
const suiteDir = "../testdata/conformance"

// caseFile is one conformance case: a scenario in the simulate format, the
// Kafka test it mirrors, and what the assignor must answer. The scenario is
// kept raw and handed to scenario.Parse, so the suite exercises exactly the
// format users write.
type caseFile struct {
	KafkaTest string          `json:"kafka_test"`
	Scenario  json.RawMessage `json:"scenario"`
	Expect    expectation     `json:"expect"`
}

// expectation is what a case checks. Assignment is exact (members that get
// nothing may be left out); Guarantees name properties for cases whose exact
// output in Kafka depends on Java HashMap iteration order.
type expectation struct {
	Assignment map[string]map[string][]int32 `json:"assignment"`
	Guarantees []string                      `json:"guarantees"`
}

// assignment maps member id, then topic name, to ascending partitions.
type assignment = map[string]map[string][]int32

// checker checks one guarantee of an assignment.
type checker func(g *group, got assignment) error

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
	var c caseFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("%s: unexpected data after the case object", path)
	}
	if c.KafkaTest == "" {
		return nil, nil, fmt.Errorf("%s: kafka_test: required, name the Kafka @Test this case mirrors", path)
	}
	if len(c.Scenario) == 0 {
		return nil, nil, fmt.Errorf("%s: scenario: required", path)
	}
	if c.Expect.Assignment == nil && len(c.Expect.Guarantees) == 0 {
		return nil, nil, fmt.Errorf("%s: expect: needs an assignment or guarantees", path)
	}
	for _, name := range c.Expect.Guarantees {
		if _, ok := guarantee(name); !ok {
			return nil, nil, fmt.Errorf("%s: expect.guarantees: unknown guarantee %q", path, name)
		}
	}
	sc, err := scenario.Parse(c.Scenario)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: scenario.%w", path, err)
	}
	return &c, sc, nil
}

func newRegistry(t *testing.T) *wasmruntime.Registry {
	t.Helper()
	ctx := context.Background()
	cfg := wasmruntime.NewConfig().WithCompilationCacheDir(filepath.Join(os.TempDir(), "wasmassign-test-cache"))
	h, err := wasmruntime.NewHost(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	reg := wasmruntime.NewRegistry(h)
	if err := reg.LoadBuiltins(ctx, builtin.FS()); err != nil {
		t.Fatal(err)
	}
	return reg
}

// chooseAssignor picks the assignor the way `wasmassign simulate` does
// without --assignor: the scenario's assignor, else the one serving its
// protocol.
func chooseAssignor(reg *wasmruntime.Registry, sc *scenario.Scenario) (*wasmruntime.Assignor, error) {
	if sc.Assignor != "" {
		a, ok := reg.Lookup(sc.Assignor)
		if !ok {
			return nil, fmt.Errorf("assignor %q: no built-in provides it", sc.Assignor)
		}
		return a, nil
	}
	if sc.Protocol == "" {
		return nil, errors.New("the scenario names neither a protocol nor an assignor")
	}
	a, ok := reg.ForProtocol(sc.Protocol)
	if !ok {
		return nil, fmt.Errorf("protocol %q: no built-in serves it", sc.Protocol)
	}
	return a, nil
}

// TestConformance runs every case of the suite through the built-in wasm
// assignors in the sandbox and checks its expectations.
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
			a, err := chooseAssignor(reg, sc)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Assignor == "" {
				sc.Assignor = a.Info.Name
			}
			req, _, err := sc.Request()
			if err != nil {
				t.Fatalf("building the request: %v", err)
			}
			resp, err := a.Assign(context.Background(), req)
			if err != nil {
				t.Fatalf("%s (mirrors %s): %v", a.Info.Name, c.KafkaTest, err)
			}
			if resp.Error != "" {
				t.Fatalf("%s (mirrors %s) answered an error: %s", a.Info.Name, c.KafkaTest, resp.Error)
			}
			got := scenario.NewOutput(req, a.Info.Name, resp, nil).Target
			if c.Expect.Assignment != nil {
				if diff := diffAssignment(normalise(c.Expect.Assignment), normalise(got)); diff != "" {
					t.Errorf("%s (mirrors %s): assignment differs:\n%s", a.Info.Name, c.KafkaTest, diff)
				}
			}
			g := newGroup(sc)
			for _, name := range c.Expect.Guarantees {
				check, _ := guarantee(name)
				if err := check(g, got); err != nil {
					t.Errorf("%s (mirrors %s): not %s: %v", a.Info.Name, c.KafkaTest, name, err)
				}
			}
		})
	}
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
