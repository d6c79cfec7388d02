// Package layering holds the test that keeps the repository's layers apart:
// calls go down, never up, and the pure core stays free of I/O. The rules
// are the ones ARCHITECTURE.md draws; this test is where they are enforced.
package layering

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

const module = "github.com/wasmassign/wasmassign"

// rule says what the packages under one path (the package itself and its
// subpackages) must never depend on, directly or through another package.
// A path names itself and the packages below it; "=net" names net alone
// (net/netip is pure).
type rule struct {
	pkg   string
	never []string
	// neverImport is what the packages must not import themselves, though
	// a package they import may: fmt imports os, and the proxy's
	// configuration type names the coordinator's rack rules.
	neverImport []string
	reason      string
}

// rules are the layers' import rules.
func rules() []rule {
	return []rule{
		{pkg: "coordinator", never: []string{module + "/runtime", module + "/internal", "github.com/tetratelabs/wazero", "github.com/prometheus", "github.com/twmb/franz-go/pkg/kgo", "net/http", "os/exec"},
			neverImport: []string{"=net", "=os"},
			reason:      "the coordinator is a pure state machine: everything arrives as an input"},
		{pkg: "runtime", never: []string{module + "/coordinator", module + "/internal", "github.com/twmb/franz-go", "github.com/prometheus"},
			reason: "the plugin host knows nothing of groups, the wire protocol or metrics"},
		{pkg: "plugins", never: []string{module + "/runtime", module + "/coordinator", module + "/internal/", "github.com/tetratelabs/wazero"},
			reason: "a built-in's algorithm is a pure function of its request, the same in wasm and natively"},
		{pkg: "internal/driver", never: []string{module + "/runtime", module + "/internal/proxy", module + "/internal/gateway", module + "/internal/daemon", module + "/internal/metrics", "github.com/prometheus"},
			reason: "the driver reaches plugins, the upstream and metrics through its own interfaces and hooks"},
		{pkg: "internal/gateway", never: []string{module + "/runtime", module + "/internal/driver", module + "/internal/daemon", module + "/internal/metrics", "github.com/prometheus"},
			reason: "the gateway reaches the driver through its Driver interface"},
		{pkg: "internal/proxy", never: []string{module + "/runtime", module + "/internal/gateway", module + "/internal/driver", module + "/internal/daemon", module + "/internal/metrics"},
			neverImport: []string{module + "/coordinator"},
			reason:      "the proxy hands requests to an Interceptor and knows no group"},
		{pkg: "internal/upstream", never: []string{module + "/coordinator", module + "/runtime", module + "/internal/proxy", module + "/internal/gateway", module + "/internal/driver"},
			reason: "upstream access serves the layers above and knows none of them"},
		{pkg: "internal/loadtest", never: []string{module + "/coordinator", module + "/runtime", module + "/internal/daemon", module + "/internal/gateway", module + "/internal/driver", module + "/internal/upstream", "=" + module + "/internal/proxy"},
			reason: "the load generator knows its target only by the wire (internal/proxy/frame's framing is all it shares)"},
		{pkg: "internal/cluster", never: []string{module + "/runtime", module + "/internal/proxy", module + "/internal/gateway", module + "/internal/driver", module + "/internal/daemon", module + "/internal/metrics", "github.com/prometheus"},
			reason: "the gateway cluster's state and ownership serve the daemon, which wires them to the other layers"},
		{pkg: "internal/metrics", never: []string{module + "/coordinator", module + "/runtime", module + "/internal/driver", module + "/internal/gateway", module + "/internal/proxy"},
			reason: "metrics are fed through hooks; they never reach into a layer"},
	}
}

// onlyImportedBy lists packages that only the named importers may use.
func onlyImportedBy() map[string][]string {
	return map[string][]string{
		module + "/internal/daemon": {module + "/cmd/wasmassign"},
		module + "/internal/bench":  {module + "/cmd/wasmassign"},
	}
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// TestLayering_CallsGoDownNeverUp checks every package of the module
// against the rules above, through its transitive dependencies, and that
// no package imports cmd/.
func TestLayering_CallsGoDownNeverUp(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = testutil.Root(t)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []listed
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(pkgs))
	}
	rules, onlyImportedBy := rules(), onlyImportedBy()
	checked := map[string]int{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		for _, r := range rules {
			if rel != r.pkg && !strings.HasPrefix(rel, r.pkg+"/") {
				continue
			}
			checked[r.pkg]++
			for _, dep := range p.Deps {
				// plugins/internal is the plugins' own.
				if matchesAny(dep, r.never) && !(r.pkg == "plugins" && strings.HasPrefix(dep, module+"/plugins/")) {
					t.Errorf("%s depends on %s: %s", p.ImportPath, dep, r.reason)
				}
			}
			for _, imp := range p.Imports {
				if matchesAny(imp, r.neverImport) {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, r.reason)
				}
			}
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/cmd/") {
				t.Errorf("%s imports %s: commands are the top", p.ImportPath, imp)
			}
			if allowed, ok := onlyImportedBy[imp]; ok && !contains(allowed, p.ImportPath) {
				t.Errorf("%s imports %s, which only %v may", p.ImportPath, imp, allowed)
			}
		}
	}
	for _, r := range rules {
		if checked[r.pkg] == 0 {
			t.Errorf("no package under %s: the rule checks nothing", r.pkg)
		}
	}
}

// matchesAny reports whether path is one of prefixes or below one.
func matchesAny(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if exact, ok := strings.CutPrefix(p, "="); ok {
			if path == exact {
				return true
			}
			continue
		}
		if path == strings.TrimSuffix(p, "/") || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
