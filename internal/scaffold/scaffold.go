// Package scaffold writes new plugin projects for `wasmassign new`: one per
// SDK language, each a folder that builds exactly one NAME.wasm with `make`
// and carries a copy of its SDK, because nothing of wasmassign is published.
//
// # Where the SDK copies come from
//
// The binary must carry the SDKs' sources, and go:embed can only take files
// from the embedding package's own directory tree within its own module. So
// each SDK's files are embedded where they live: package sdk (sdk/) embeds
// the Rust, C and AssemblyScript SDKs, and package gosdk at the root of the
// sdk/go module, which no package of this module could reach into, embeds
// the Go SDK. Each hands out just what a build compiles, and a project's
// wasmassign/ is that, byte for byte.
//
// templates/ holds each language's project files. Every template file ends
// in .tmpl, so that no tool mistakes a template for source of this module;
// the suffix is dropped when it is written, and gitignore.tmpl becomes
// .gitignore. The placeholders @NAME@, @CRATE@, @GOMODULE@, @GOVERSION@,
// @LANGUAGE@, @NPMNAME@, @SOURCE@ and @TOOLCHAIN@ are replaced on the way
// out.
//
// The package only writes files. It must never import the runtime or run a
// build: checking a name against the built-in assignors is the command's job.
package scaffold

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/wasmassign/wasmassign/sdk"
	gosdk "github.com/wasmassign/wasmassign/sdk/go"
)

// files holds the templates.
//
//go:embed templates
var files embed.FS

// lang is what one language's project needs besides its templates.
type lang struct {
	name      string       // the --lang value
	title     string       // the language's name in prose
	source    string       // the file holding the assignor, for the README
	toolchain string       // one README sentence on what make installs
	sdk       func() fs.FS // the SDK's files, which go to wasmassign/
}

// langs lists the languages in the order usage shows them. It is a function
// so that there is no package-level state to mutate.
func langs() []lang {
	return []lang{
		{"go", "Go", "main.go",
			"It needs Go @GOVERSION@ or newer and nothing else.",
			gosdk.Source},
		{"rust", "Rust", "src/lib.rs",
			"It needs Debian's rustc, cargo and wasm32 standard library (`rustc cargo libstd-rust-dev-wasm32`), which `make` installs with apt when they are missing; `make test` runs the unit tests natively.",
			sdk.Rust},
		{"c", "C", "plugin.c",
			"It needs Debian's clang-14, lld-14 and wasi-libc, which `make` installs with apt when they are missing.",
			sdk.C},
		{"assemblyscript", "AssemblyScript", "assembly/index.ts",
			"It needs node and npm (`make` installs them with apt when they are missing), then installs AssemblyScript 0.28.20 and the SDK into `node_modules/`.",
			sdk.AssemblyScript},
	}
}

// Langs returns the languages Write accepts, as --lang spells them.
func Langs() []string {
	var out []string
	for _, l := range langs() {
		out = append(out, l.name)
	}
	return out
}

// ErrUnknownLang is returned by Write for a language it has no templates for.
var ErrUnknownLang = errors.New("unknown language")

// sdkDir is where a project keeps its copy of the SDK.
const sdkDir = "wasmassign"

// Options are a project's settings besides its language and assignor name.
// The zero value derives each of them from the name.
type Options struct {
	// GoModule is a Go project's module path; empty means GoModulePath of
	// the name. Write does not check it (CheckGoModulePath does), and the
	// other languages have no module path.
	GoModule string
}

// Write writes a plugin project for language lang into dir, whose assignor
// is called name. dir must exist; Write does not check that it is empty or
// that name is a usable assignor name, which is the caller's business, but
// whatever name is, the names the language's own files give the project
// are ones the language accepts. It returns the paths it wrote, relative to
// dir.
func Write(dir, langName, name string, opts Options) ([]string, error) {
	var l *lang
	for _, c := range langs() {
		if c.name == langName {
			l = &c
			break
		}
	}
	if l == nil {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownLang, langName, strings.Join(Langs(), ", "))
	}
	goVersion, err := sdkGoVersion()
	if err != nil {
		return nil, err
	}
	module := opts.GoModule
	if module == "" {
		module = GoModulePath(name)
	}
	r := strings.NewReplacer(
		"@TOOLCHAIN@", l.toolchain,
		"@NAME@", name,
		"@CRATE@", crateName(name),
		"@GOMODULE@", module,
		"@GOVERSION@", goVersion,
		"@LANGUAGE@", l.title,
		"@NPMNAME@", npmName(name),
		"@SOURCE@", l.source,
	)
	var written []string
	put := func(rel string, data []byte) error {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		written = append(written, rel)
		return nil
	}

	// The README is shared; the rest is the language's own.
	readme, err := files.ReadFile("templates/README.md.tmpl")
	if err != nil {
		return nil, err
	}
	// Twice: the toolchain sentence brings placeholders of its own.
	if err := put("README.md", []byte(r.Replace(r.Replace(string(readme))))); err != nil {
		return nil, err
	}
	tmplRoot := "templates/" + l.name
	err = fs.WalkDir(files, tmplRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, tmplRoot+"/"), ".tmpl")
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		return put(rel, []byte(r.Replace(string(data))))
	})
	if err != nil {
		return written, fmt.Errorf("writing the %s templates: %w", l.name, err)
	}

	src := l.sdk()
	err = fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		return put(path.Join(sdkDir, p), data)
	})
	if err != nil {
		return written, fmt.Errorf("writing the %s SDK: %w", l.name, err)
	}
	return written, nil
}

// goDirective finds the go line of a go.mod.
var goDirective = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)

// sdkGoVersion is the Go version the Go SDK's go.mod asks for; a Go project
// asks for the same, so that the SDK copy builds with the Go it was made for.
func sdkGoVersion() (string, error) {
	mod, err := fs.ReadFile(gosdk.Source(), "go.mod")
	if err != nil {
		return "", fmt.Errorf("reading the embedded Go SDK's go.mod: %w", err)
	}
	m := goDirective.FindSubmatch(mod)
	if m == nil {
		return "", errors.New("the embedded Go SDK's go.mod has no go line")
	}
	return string(m[1]), nil
}
