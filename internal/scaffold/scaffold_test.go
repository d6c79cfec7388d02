package scaffold

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// sdkRoot is the repository's sdk/ directory, seen from this package.
const sdkRoot = "../../sdk"

// sdkSources says which files of each SDK a project needs, by language:
// everything a build compiles, and nothing of the SDK's tests, kit or build
// output. Each function reports whether a path (slash-separated, relative to
// the SDK) is one. It says in its own words what the embed patterns of
// packages sdk and gosdk select, so that a pattern that takes too much or
// too little shows.
func sdkSources() map[string]func(rel string) bool {
	return map[string]func(rel string) bool{
		"go": func(rel string) bool {
			dir, base := path.Split(rel)
			return rel == "go.mod" ||
				(dir == "abi/" || dir == "guest/") && strings.HasSuffix(base, ".go") && !strings.HasSuffix(base, "_test.go")
		},
		"rust": func(rel string) bool {
			return rel == "Cargo.toml" || path.Dir(rel) == "src" && strings.HasSuffix(rel, ".rs")
		},
		"c": func(rel string) bool { return rel == "wasmassign.h" || rel == "wasmassign.c" },
		"assemblyscript": func(rel string) bool {
			return rel == "package.json" || rel == "index.ts" || rel == "exports.ts" ||
				path.Dir(rel) == "assembly" && strings.HasSuffix(rel, ".ts")
		},
	}
}

// wantCopy is what a project's wasmassign/ should hold for lang: the files of
// sdk/LANG that keep selects, by path relative to it.
func wantCopy(t *testing.T, lang string, keep func(string) bool) map[string][]byte {
	t.Helper()
	root := filepath.Join(sdkRoot, lang)
	want := make(map[string][]byte)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "node_modules" || d.Name() == "target" {
				return fs.SkipDir
			}
			return nil
		}
		if !keep(rel) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		want[rel] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// readTree reads every file under dir, by slash path relative to it.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	got := make(map[string][]byte)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return got
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Every language's project comes out whole: no placeholder is left in any
// file, the assignor's name is registered in the source, the Makefile builds
// NAME.wasm, and wasmassign/ holds the SDK's sources as they are in sdk/,
// byte for byte, and nothing else.
func TestWrite_FillsEveryPlaceholderAndCopiesTheSDK(t *testing.T) {
	placeholder := regexp.MustCompile(`@[A-Z]+@`)
	sources := map[string]string{"go": "main.go", "rust": "src/lib.rs", "c": "plugin.c", "assemblyscript": "assembly/index.ts"}
	for _, lang := range Langs() {
		t.Run(lang, func(t *testing.T) {
			dir := t.TempDir()
			const name = "9lives.demo_x"
			written, err := Write(dir, lang, name, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := readTree(t, dir)
			if len(got) != len(written) {
				t.Errorf("Write reports %d files, the directory holds %d", len(written), len(got))
			}
			for rel, data := range got {
				if m := placeholder.Find(data); m != nil && !strings.HasPrefix(rel, sdkDir+"/") {
					t.Errorf("%s still holds the placeholder %s", rel, m)
				}
			}
			if src := got[sources[lang]]; !bytes.Contains(src, []byte(`"`+name+`"`)) {
				t.Errorf("%s does not name the assignor %q", sources[lang], name)
			}
			if mk := got["Makefile"]; !regexp.MustCompile(`(?m)^NAME\s*:= ` + regexp.QuoteMeta(name) + `$`).Match(mk) {
				t.Errorf("the Makefile does not set NAME to %s:\n%s", name, mk)
			}
			keep := sdkSources()[lang]
			if keep == nil {
				t.Fatalf("sdkSources has no selection for %s", lang)
			}
			want := wantCopy(t, lang, keep)
			if len(want) == 0 {
				t.Fatalf("no files of %s/%s selected", sdkRoot, lang)
			}
			for _, rel := range sortedKeys(want) {
				g, ok := got[sdkDir+"/"+rel]
				switch {
				case !ok:
					t.Errorf("%s/%s is missing: sdk/%s/%s is not embedded", sdkDir, rel, lang, rel)
				case !bytes.Equal(g, want[rel]):
					t.Errorf("%s/%s differs from sdk/%s/%s", sdkDir, rel, lang, rel)
				}
			}
			for _, rel := range sortedKeys(got) {
				sub, inSDK := strings.CutPrefix(rel, sdkDir+"/")
				if _, wanted := want[sub]; inSDK && !wanted {
					t.Errorf("%s is not one of the files of sdk/%s a build needs", rel, lang)
				}
			}
		})
	}
}

func TestWrite_RejectsAnUnknownLanguage(t *testing.T) {
	dir := t.TempDir()
	_, err := Write(dir, "cobol", "x", Options{})
	if !errors.Is(err, ErrUnknownLang) {
		t.Fatalf("err = %v, want ErrUnknownLang", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Write wrote %d entries for an unknown language", len(entries))
	}
}

// The project's name in go.mod, Cargo.toml and package.json is the one its
// language allows, and --module's path (Options.GoModule) goes to go.mod as
// it is, while the assignor keeps its own name in the source.
func TestWrite_NamesTheProjectAsItsLanguageAllows(t *testing.T) {
	tests := []struct {
		lang, name string
		opts       Options
		file, want string
	}{
		{"go", "go", Options{}, "go.mod", "module example/go\n"},
		{"go", "go", Options{GoModule: "example.com/acme/go"}, "go.mod", "module example.com/acme/go\n"},
		{"rust", "crate", Options{}, "Cargo.toml", `name = "plugin-crate"`},
		{"rust", "wasmassign", Options{}, "Cargo.toml", `name = "plugin-wasmassign"`},
		{"assemblyscript", "node_modules", Options{}, "package.json", `"name": "plugin-node_modules"`},
	}
	sources := map[string]string{"go": "main.go", "rust": "src/lib.rs", "assemblyscript": "assembly/index.ts"}
	for _, tt := range tests {
		t.Run(tt.lang+"/"+tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Write(dir, tt.lang, tt.name, tt.opts); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tt.want) {
				t.Errorf("%s does not say %q:\n%s", tt.file, tt.want, data)
			}
			src, err := os.ReadFile(filepath.Join(dir, sources[tt.lang]))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(src), `"`+tt.name+`"`) {
				t.Errorf("%s does not register the assignor %q", sources[tt.lang], tt.name)
			}
		})
	}
}
