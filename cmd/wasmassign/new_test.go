package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/scaffold"
)

// scenarioDoc is the part of a scenario file that decides what a valid
// assignment is.
type scenarioDoc struct {
	Topics []struct {
		Name           string `json:"name"`
		PartitionCount int32  `json:"partition_count"`
	} `json:"topics"`
	Members []struct {
		ID     string   `json:"id"`
		Topics []string `json:"topics"`
	} `json:"members"`
}

func readScenarioDoc(t *testing.T, path string) scenarioDoc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sc scenarioDoc
	if err := json.Unmarshal(data, &sc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sc
}

// checkValidAssignment fails unless every partition of every existing topic
// that someone subscribes to went to exactly one member that subscribes to
// it, and nothing else was assigned. It also checks what the scaffolds'
// round robin promises: partition counts differ by at most one between
// members that subscribe to the same topics.
func checkValidAssignment(t *testing.T, sc scenarioDoc, target map[string]map[string][]int32) {
	t.Helper()
	partitions := make(map[string]int32)
	for _, tp := range sc.Topics {
		partitions[tp.Name] = tp.PartitionCount
	}
	subscribes := make(map[string]map[string]bool)
	owner := make(map[string][]string) // topic -> partition's owner
	for _, m := range sc.Members {
		subscribes[m.ID] = make(map[string]bool)
		for _, tp := range m.Topics {
			subscribes[m.ID][tp] = true
			if n, ok := partitions[tp]; ok && owner[tp] == nil {
				owner[tp] = make([]string, n)
			}
		}
	}
	for member, topics := range target {
		if subscribes[member] == nil {
			t.Errorf("unknown member %q got partitions", member)
			continue
		}
		for tp, parts := range topics {
			if !subscribes[member][tp] || owner[tp] == nil {
				t.Errorf("member %s got topic %s, which it does not subscribe to or which does not exist", member, tp)
				continue
			}
			for _, p := range parts {
				switch {
				case p < 0 || int(p) >= len(owner[tp]):
					t.Errorf("member %s got %s[%d], which does not exist", member, tp, p)
				case owner[tp][p] != "":
					t.Errorf("%s[%d] went to both %s and %s", tp, p, owner[tp][p], member)
				default:
					owner[tp][p] = member
				}
			}
		}
	}
	for tp, owners := range owner {
		for p, m := range owners {
			if m == "" {
				t.Errorf("%s[%d] is subscribed but went to nobody", tp, p)
			}
		}
	}
	// Members with equal subscriptions get counts at most one apart.
	counts := make(map[string][]int)
	for _, m := range sc.Members {
		key := strings.Join(slices.Sorted(slices.Values(m.Topics)), ",")
		n := 0
		for _, parts := range target[m.ID] {
			n += len(parts)
		}
		counts[key] = append(counts[key], n)
	}
	for key, c := range counts {
		if slices.Max(c)-slices.Min(c) > 1 {
			t.Errorf("members subscribing to %s got %v partitions: not balanced", key, c)
		}
	}
}

// wasmFiles lists the .wasm files under dir, leaving out the toolchains'
// caches (cargo's target/, npm's node_modules/), which are not the build's
// product.
func wasmFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "target" || d.Name() == "node_modules") {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".wasm") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A mixed scenario: members with different subscriptions, a topic nobody
// but one member wants, and a topic that does not exist.
const mixedScenario = `{
  "topics": [{"name": "a", "partition_count": 7}, {"name": "b", "partition_count": 1}, {"name": "c", "partition_count": 4}],
  "members": [
    {"id": "m1", "topics": ["a", "b"]},
    {"id": "m2", "topics": ["a", "c", "ghost"]},
    {"id": "m3", "topics": ["c"]},
    {"id": "m4", "topics": ["a", "b"]}
  ]
}`

// Every language's scaffold builds with make into exactly one NAME.wasm,
// which inspect accepts and lists the assignor NAME of, and whose assignor
// gives valid assignments. The names exercise '.', '_', '-' and a leading
// digit (which Cargo does not take as a package name).
func TestNew_EveryLanguageBuildsAPluginThatInspectAndSimulateAccept(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four plugin projects (about a minute); not in -short mode")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed; the scaffolds build with make")
	}
	names := map[string]string{
		"go":             "demo.go-rr",
		"rust":           "1st.rust_rr",
		"c":              "demo-c",
		"assemblyscript": "demo_as.rr",
	}
	if got := scaffold.Langs(); len(got) != len(names) {
		t.Fatalf("scaffold.Langs() = %v; this test covers %d languages", got, len(names))
	}
	example := filepath.Join("..", "..", "examples", "scenario.json")
	mixed := writeScenario(t, mixedScenario)

	// The four builds run at once, whatever -parallel says: they spend much
	// of their time waiting on apt, npm and the linkers.
	type build struct {
		dir  string
		out  []byte
		err  error
		took time.Duration
	}
	builds := make(map[string]*build)
	root := t.TempDir()
	for _, lang := range scaffold.Langs() {
		dir := filepath.Join(root, names[lang])
		if code, _, stderr := wasmassign(t, "new", "--lang", lang, dir); code != 0 {
			t.Fatalf("new --lang %s: exit %d: %s", lang, code, stderr)
		}
		builds[lang] = &build{dir: dir}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, b := range builds {
		wg.Go(func() {
			start := time.Now()
			b.out, b.err = makeProject(ctx, b.dir)
			b.took = time.Since(start)
		})
	}
	wg.Wait()

	for _, lang := range scaffold.Langs() {
		name, b := names[lang], builds[lang]
		t.Run(lang, func(t *testing.T) {
			if b.err != nil {
				t.Fatalf("make in the %s scaffold: %v\n%s", lang, b.err, b.out)
			}
			t.Logf("make took %v", b.took.Round(time.Millisecond))
			dir := b.dir

			if got := wasmFiles(t, dir); !slices.Equal(got, []string{name + ".wasm"}) {
				t.Fatalf("the build left .wasm files %v; want exactly [%s.wasm]", got, name)
			}
			wasm := filepath.Join(dir, name+".wasm")

			code, stdout, stderr := wasmassign(t, "inspect", "--format", "json", wasm)
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, stderr)
			}
			var ins inspection
			if err := json.Unmarshal([]byte(stdout), &ins); err != nil {
				t.Fatalf("inspect output: %v\n%s", err, stdout)
			}
			if len(ins.Assignors) != 1 || ins.Assignors[0].Name != name || !slices.Equal(ins.Assignors[0].Protocols, []string{name}) {
				t.Fatalf("inspect lists assignors %+v; want one, %q, with protocol %q", ins.Assignors, name, name)
			}

			for _, sc := range []string{example, mixed} {
				out := simulateJSON(t, "--plugin", wasm, "--assignor", name, "--scenario", sc)
				if out.Assignor != name {
					t.Fatalf("simulate ran %q; want %q", out.Assignor, name)
				}
				checkValidAssignment(t, readScenarioDoc(t, sc), out.Target)
			}
		})
	}
}

// makeProject runs make in a generated project as a user would: not as a
// sub-make of `make test`, whose flags and jobserver are no business of the
// scaffold, and not in this repository's Go workspace, which a GOWORK in the
// environment would point the Go project's build at.
func makeProject(ctx context.Context, dir string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "make")
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "MAKEFLAGS" || k == "MFLAGS" || k == "MAKELEVEL" || k == "GOWORK"
	})
	cmd.Env = append(cmd.Env, "GOWORK=off")
	return cmd.CombinedOutput()
}

// A project builds whatever its directory is called, as long as that is an
// assignor name. As Go module paths, "go" is one the go command refuses and
// "fmt" one that collides with the standard library's package; as a Cargo
// package, "wasmassign" collides with the SDK the project depends on.
func TestNew_ProjectBuildsWhateverItsDirectoryIsCalled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three plugin projects; not in -short mode")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed; the scaffolds build with make")
	}
	root := t.TempDir()
	for _, tt := range []struct{ lang, name string }{{"go", "go"}, {"go", "fmt"}, {"rust", "wasmassign"}} {
		name := tt.name
		t.Run(tt.lang+"/"+name, func(t *testing.T) {
			dir := filepath.Join(root, tt.lang, name)
			if code, _, stderr := wasmassign(t, "new", "--lang", tt.lang, dir); code != 0 {
				t.Fatalf("new --lang %s %s: exit %d: %s", tt.lang, dir, code, stderr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			if out, err := makeProject(ctx, dir); err != nil {
				t.Fatalf("make in %s: %v\n%s", dir, err, out)
			}
			code, stdout, stderr := wasmassign(t, "inspect", "--format", "json", filepath.Join(dir, name+".wasm"))
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, stderr)
			}
			var ins inspection
			if err := json.Unmarshal([]byte(stdout), &ins); err != nil {
				t.Fatalf("inspect output: %v\n%s", err, stdout)
			}
			if len(ins.Assignors) != 1 || ins.Assignors[0].Name != name {
				t.Fatalf("inspect lists assignors %+v; want one, %q", ins.Assignors, name)
			}
		})
	}
}

// Each kind of bad input exits 2 with one line that names the problem, and
// writes nothing.
func TestNew_RejectsBadInputNamingTheProblem(t *testing.T) {
	root := t.TempDir()
	full := filepath.Join(root, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // in the one line of stderr
	}{
		{"built-in range", []string{"--lang", "go", filepath.Join(root, "range")}, `"range" is the name of a built-in assignor`},
		{"built-in roundrobin", []string{"--lang", "rust", filepath.Join(root, "roundrobin")}, `"roundrobin" is the name of a built-in assignor`},
		{"built-in sticky", []string{"--lang", "c", filepath.Join(root, "sticky")}, `"sticky" is the name of a built-in assignor`},
		{"built-in cooperative-sticky", []string{"--lang", "go", filepath.Join(root, "cooperative-sticky")}, `"cooperative-sticky" is the name of a built-in assignor`},
		{"built-in leader-rack-range", []string{"--lang", "assemblyscript", filepath.Join(root, "leader-rack-range")}, `"leader-rack-range" is the name of a built-in assignor`},
		{"uppercase", []string{"--lang", "go", filepath.Join(root, "MyAssignor")}, `"MyAssignor" is not a valid assignor name`},
		{"space", []string{"--lang", "go", filepath.Join(root, "my assignor")}, `"my assignor" is not a valid assignor name`},
		{"non-ASCII", []string{"--lang", "c", filepath.Join(root, "zuordnung-ü")}, `"zuordnung-ü" is not a valid assignor name`},
		{"leading dash", []string{"--lang", "go", filepath.Join(root, "-x")}, `"-x" is not a valid assignor name`},
		{"trailing dot", []string{"--lang", "go", filepath.Join(root, "x.")}, `"x." is not a valid assignor name`},
		{"non-empty directory", []string{"--lang", "go", full}, "is not empty (it holds notes.txt)"},
		{"a file, not a directory", []string{"--lang", "go", file}, "exists and is not a directory"},
		{"unknown language", []string{"--lang", "java", filepath.Join(root, "x")}, `--lang: unknown language "java" (have go, rust, c, assemblyscript)`},
		{"no language", []string{filepath.Join(root, "x")}, "--lang is required"},
		{"no directory", []string{"--lang", "go"}, "give the project's directory"},
		{"two directories", []string{"--lang", "go", filepath.Join(root, "x"), filepath.Join(root, "y")}, "unexpected argument"},
		{"unknown flag", []string{"--language", "go", filepath.Join(root, "x")}, "flag provided but not defined"},
		{"--module go", []string{"--lang", "go", "--module", "go", filepath.Join(root, "x")}, `--module "go" is not a usable module path: first path element "go" has no dot`},
		{"--module std", []string{"--lang", "go", "--module", "std", filepath.Join(root, "x")}, `--module "std" is not a usable module path: first path element "std" has no dot`},
		{"--module empty", []string{"--lang", "go", "--module=", filepath.Join(root, "x")}, `--module "" is not a usable module path: empty`},
		{"--module uppercase domain", []string{"--lang", "go", "--module", "Acme.com/x", filepath.Join(root, "x")}, `--module "Acme.com/x" is not a usable module path: first path element "Acme.com" is not a domain name`},
		{"--module space", []string{"--lang", "go", "--module", "example/my plugin", filepath.Join(root, "x")}, `--module "example/my plugin" is not a usable module path: invalid character ' '`},
		{"--module non-ASCII", []string{"--lang", "go", "--module", "example/ü", filepath.Join(root, "x")}, `--module "example/ü" is not a usable module path: invalid character 'ü'`},
		{"--module trailing dot", []string{"--lang", "go", "--module", "example/x.", filepath.Join(root, "x")}, `path element "x." ends with a dot`},
		{"--module leading dash", []string{"--lang", "go", "--module", "example/-x", filepath.Join(root, "x")}, `path element "-x" starts with a dash`},
		{"--module double slash", []string{"--lang", "go", "--module", "example//x", filepath.Join(root, "x")}, "empty path element"},
		{"--module Windows name", []string{"--lang", "go", "--module", "example/aux", filepath.Join(root, "x")}, `path element "aux" is a reserved file name on Windows`},
		{"--module with rust", []string{"--lang", "rust", "--module", "example.com/x", filepath.Join(root, "x")}, "--module sets a Go module path: it goes with --lang go, not --lang rust"},
	}
	before := listDir(t, root)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := wasmassign(t, append([]string{"new"}, tt.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stdout %q, stderr %q", code, stdout, stderr)
			}
			// The flag package prints its usage after its own error; the
			// command's own errors are one line.
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if tt.name != "unknown flag" && len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not say %q", stderr, tt.want)
			}
		})
	}
	if after := listDir(t, root); !slices.Equal(before, after) {
		t.Errorf("rejected calls changed %s: %v, then %v", root, before, after)
	}
	if got := listDir(t, full); !slices.Equal(got, []string{"notes.txt"}) {
		t.Errorf("the non-empty directory now holds %v", got)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// --module sets the Go project's module path, which new reports; without
// it, new reports the path it derived.
func TestNew_ModuleSetsTheGoModulePath(t *testing.T) {
	root := t.TempDir()
	for _, tt := range []struct{ module, want string }{
		{"", "example/go"},
		{"example.com/acme/go", "example.com/acme/go"},
	} {
		dir := filepath.Join(root, "m"+strconv.Itoa(len(tt.module)), "go")
		args := []string{"new", "--lang", "go", dir}
		if tt.module != "" {
			args = []string{"new", "--lang", "go", "--module", tt.module, dir}
		}
		code, stdout, stderr := wasmassign(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(stdout, "its Go module path is "+tt.want+" ") {
			t.Errorf("%v: stdout does not give the module path %s:\n%s", args, tt.want, stdout)
		}
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(mod), "module "+tt.want+"\n") {
			t.Errorf("%v: go.mod does not declare %s:\n%s", args, tt.want, mod)
		}
	}
}

// An existing empty directory is fine, and so is "." inside one: the
// assignor is named after the directory itself.
func TestNew_AcceptsAnEmptyDirectoryAndNamesTheAssignorAfterIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "empty-one")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	code, stdout, stderr := wasmassign(t, "new", "--lang", "c", ".")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "for the assignor empty-one") {
		t.Errorf("stdout does not name the assignor empty-one:\n%s", stdout)
	}
	src, err := os.ReadFile(filepath.Join(dir, "plugin.c"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `.name = "empty-one"`) {
		t.Errorf("plugin.c does not register empty-one:\n%s", src)
	}
	mk, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "NAME     := empty-one\n") {
		t.Errorf("the Makefile does not build empty-one.wasm:\n%s", mk)
	}
}

// The list new checks names against is the list the embedded built-in
// plugins actually claim.
func TestNew_BuiltinNamesMatchTheEmbeddedPlugins(t *testing.T) {
	var lim limitFlags
	fset := flag.NewFlagSet("test", flag.ContinueOnError)
	lim.register(fset)
	if err := fset.Parse(nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e := &env{stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h, reg, err := lim.loadRegistry(ctx, e, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	var got []string
	for _, a := range reg.Assignors() {
		got = append(got, a.Info.Name)
	}
	slices.Sort(got)
	if want := builtinAssignorNames(); !slices.Equal(got, want) {
		t.Fatalf("the built-in plugins claim %v; new refuses %v", got, want)
	}
}
