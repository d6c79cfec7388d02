package scaffold

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// Each name becomes a module path the go command accepts and that cannot
// collide with the standard library, and a name that is fine as an
// assignor name stays recognisable behind the example/ prefix.
func TestGoModulePath(t *testing.T) {
	tests := []struct{ name, want string }{
		{"my-assignor", "example/my-assignor"},
		{"demo.go-rr", "example/demo.go-rr"},
		{"9lives.demo_x", "example/9lives.demo_x"},
		{"1abc", "example/1abc"},
		{"go", "example/go"},               // the go command refuses "go"
		{"toolchain", "example/toolchain"}, // and "toolchain"
		{"std", "example/std"},             // a package pattern, as are cmd, all and tool
		{"fmt", "example/fmt"},             // a standard package
		{"aux", "example/plugin-aux"},      // Windows' device names, with any extension
		{"con.x", "example/plugin-con.x"},
		{"com1", "example/plugin-com1"},
		{"comx", "example/comx"},
		{"Foo", "example/foo"},
		{"my plugin", "example/my-plugin"},
		{"-x", "example/x"},
		{"x.", "example/x"},
		{".x", "example/x"},
		{"ab~1", "example/ab-1"},
		{"zuordnung-ü", "example/zuordnung"},
		{"ärger", "example/rger"},
		{"名前", "example/plugin"},
		{"...", "example/plugin"},
		{"", "example/plugin"},
	}
	for _, tt := range tests {
		got := GoModulePath(tt.name)
		if got != tt.want {
			t.Errorf("GoModulePath(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if err := CheckGoModulePath(got); err != nil {
			t.Errorf("GoModulePath(%q) = %q, which CheckGoModulePath refuses: %v", tt.name, got, err)
		}
	}
}

// CheckGoModulePath takes paths under a domain and under example/ and
// test/, and says what is wrong with any other.
func TestCheckGoModulePath(t *testing.T) {
	for _, ok := range []string{
		"example", "test", "example/go", "test/std", "example/my-plugin",
		"example.com/acme/ranger", "github.com/Acme/Ranger_v2", "example.com/x/v2",
		"corp.example/team/a.b-c_d~e",
	} {
		if err := CheckGoModulePath(ok); err != nil {
			t.Errorf("CheckGoModulePath(%q) = %v, want nil", ok, err)
		}
	}
	tests := []struct{ path, want string }{
		{"", "empty"},
		{"go", `first path element "go" has no dot`},
		{"std", `first path element "std" has no dot`},
		{"fmt", `first path element "fmt" has no dot`},
		{"my-plugin", `first path element "my-plugin" has no dot`},
		{"acme/ranger", `first path element "acme" has no dot`},
		{"Example.com/x", `first path element "Example.com" is not a domain name`},
		{"ex_ample.com/x", `first path element "ex_ample.com" is not a domain name`},
		{"example/my plugin", `invalid character ' '`},
		{"example/zuordnung-ü", `invalid character 'ü'`},
		{"example/a+b", `invalid character '+'`},
		{"example/a@v1", `invalid character '@'`},
		{`example\x`, `invalid character '\\'`},
		{"example/x.", `path element "x." ends with a dot`},
		{"example/.x", `path element ".x" starts with a dot`},
		{"example/..", `path element ".." is only dots`},
		{"./x", `path element "." is only dots`},
		{"-x.com/y", `path element "-x.com" starts with a dash`},
		{"example/-x", `path element "-x" starts with a dash`},
		{"example//x", "empty path element"},
		{"example/x/", "empty path element"},
		{"/example/x", "empty path element"},
		{"example/aux", `path element "aux" is a reserved file name on Windows`},
		{"example/NUL.txt", `path element "NUL.txt" is a reserved file name on Windows`},
		{"example/lpt9", `path element "lpt9" is a reserved file name on Windows`},
		{"example/ab~1", `path element "ab~1" ends in '~' and digits`},
	}
	for _, tt := range tests {
		err := CheckGoModulePath(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckGoModulePath(%q) = %v, want an error saying %q", tt.path, err, tt.want)
		}
	}
}

// The go command itself takes every derived module path, and every path
// CheckGoModulePath lets through, as the path of a project's main package:
// it reads go.mod and resolves the package and its imports, the step at
// which "go", "std" and "fmt" fail as module paths.
func TestGoModulePath_TheGoCommandAccepts(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go is not on PATH; this test asks it about module paths")
	}
	var modules []string
	for _, name := range []string{"go", "toolchain", "std", "cmd", "all", "tool", "fmt", "net", "aux", "demo.go-rr", "1abc", "Foo", "my plugin"} {
		modules = append(modules, GoModulePath(name))
	}
	modules = append(modules, "test", "example.com/acme/ranger", "github.com/Acme/Ranger_v2", "corp.example/a.b-c_d~e")
	for _, module := range modules {
		t.Run(strings.ReplaceAll(module, "/", "_"), func(t *testing.T) {
			if err := CheckGoModulePath(module); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, err := Write(dir, "go", "demo", Options{GoModule: module}); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goCmd, "list", "-f", "{{.ImportPath}}", ".")
			cmd.Dir = dir
			// Outside this repository's workspace, for the wasm port the
			// project builds for.
			cmd.Env = append(os.Environ(), "GOWORK=off", "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != module {
				t.Errorf("go list says the package is %q, want %q", got, module)
			}
		})
	}
}

// Cargo takes only letters, digits, '-' and '_' in a package name, and no
// leading digit. Beyond that, a package name should not be a Rust keyword
// or a standard crate's name ('-' and '_' being one to Cargo), and must not
// be the SDK's, which the project depends on.
func TestCrateName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"my-assignor", "my-assignor"},
		{"x_y-z", "x_y-z"},
		{"my.assignor", "my-assignor"},
		{"a..b", "a--b"},
		{"1st", "plugin-1st"},
		{"1abc", "plugin-1abc"},
		{"1st.rust_rr", "plugin-1st-rust_rr"},
		{"9.9", "plugin-9-9"},
		{"crate", "plugin-crate"},
		{"self", "plugin-self"},
		{"Self", "plugin-self"},
		{"super", "plugin-super"},
		{"fn", "plugin-fn"},
		{"async", "plugin-async"},
		{"std", "plugin-std"},
		{"core", "plugin-core"},
		{"proc-macro", "plugin-proc-macro"},
		{"proc_macro", "plugin-proc_macro"},
		{"crate-x", "crate-x"},
		{"wasmassign", "plugin-wasmassign"},
		{"Foo", "foo"},
		{"my plugin", "my-plugin"},
		{"-x", "x"},
		{"x.", "x"},
		{"zuordnung-ü", "zuordnung"},
		{"", "plugin"},
	}
	valid := regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`)
	for _, tt := range tests {
		got := crateName(tt.name)
		if got != tt.want {
			t.Errorf("crateName(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if !valid.MatchString(got) || rustReserved(strings.ReplaceAll(got, "-", "_")) {
			t.Errorf("crateName(%q) = %q, not a usable Cargo package name", tt.name, got)
		}
	}
}

// npm takes lowercase, URL-safe names that do not start with '.' or '_',
// and never "node_modules" or "favicon.ico".
func TestNpmName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"my-assignor", "my-assignor"},
		{"demo_as.rr", "demo_as.rr"},
		{"1abc", "1abc"},
		{"crate", "crate"},
		{"node_modules", "plugin-node_modules"},
		{"favicon.ico", "plugin-favicon.ico"},
		{"Foo", "foo"},
		{"my plugin", "my-plugin"},
		{"-x", "x"},
		{".x", "x"},
		{"_x", "x"},
		{"x.", "x"},
		{"a~b", "a-b"},
		{"zuordnung-ü", "zuordnung"},
		{"", "plugin"},
	}
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	for _, tt := range tests {
		got := npmName(tt.name)
		if got != tt.want {
			t.Errorf("npmName(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if !valid.MatchString(got) || got == "node_modules" || got == "favicon.ico" {
			t.Errorf("npmName(%q) = %q, not a usable npm package name", tt.name, got)
		}
	}
}
