package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/wasmassign/wasmassign/internal/scaffold"
)

// assignorName is what `new` accepts as an assignor name: lowercase letters,
// digits, '-', '.' and '_', starting and ending with a letter or digit. The
// name doubles as a directory, a file name and the protocol name consumers
// send, and is spelled the same in every language's source. The project's
// name in go.mod, Cargo.toml and package.json comes from it too, rewritten
// by package scaffold where that language has rules of its own.
var assignorName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)

// builtinAssignorNames are the names the embedded built-in plugins claim. A
// plugin may replace a built-in, but a new project should never do so by
// accident. TestNew_BuiltinNamesMatchTheEmbeddedPlugins keeps this list
// honest; `new` does not load the built-ins itself, which would cost it a
// compilation.
func builtinAssignorNames() []string {
	return []string{"cooperative-sticky", "leader-rack-range", "range", "roundrobin", "sticky"}
}

// newCmd scaffolds a plugin project: `wasmassign new --lang L DIR`.
func newCmd(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("new", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	langs := strings.Join(scaffold.Langs(), ", ")
	var lang, module string
	fs.StringVar(&lang, "lang", "", "the plugin's language: "+langs+" (required)")
	fs.StringVar(&module, "module", "", "with --lang go, the project's Go module path (default example/NAME)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: wasmassign new --lang LANG [--module PATH] DIR\n\n"+
			"Writes a plugin project to DIR (new or empty) that builds NAME.wasm with make,\n"+
			"NAME being DIR's base name, which is also the name of its assignor.\n\n")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	// An explicit --module "" is a mistake, not a request for the default.
	moduleSet := false
	fs.Visit(func(f *flag.Flag) { moduleSet = moduleSet || f.Name == "module" })
	switch {
	case lang == "":
		return usagef("--lang is required (%s)", langs)
	case !slices.Contains(scaffold.Langs(), lang):
		return usagef("--lang: unknown language %q (have %s)", lang, langs)
	case moduleSet && lang != "go":
		return usagef("--module sets a Go module path: it goes with --lang go, not --lang %s", lang)
	case fs.NArg() == 0:
		return usagef("give the project's directory, as in: wasmassign new --lang %s my-assignor", lang)
	case fs.NArg() > 1:
		return usagef("unexpected argument %q after the directory", fs.Arg(1))
	}
	if moduleSet {
		if err := scaffold.CheckGoModulePath(module); err != nil {
			return usagef("--module %q is not a usable module path: %v", module, err)
		}
	}
	dir := fs.Arg(0)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return usagef("directory %q: %v", dir, err)
	}
	name := filepath.Base(abs)
	if !assignorName.MatchString(name) {
		return usagef("directory name %q is not a valid assignor name: use lowercase letters, digits, '-', '.' and '_', starting and ending with a letter or digit", name)
	}
	if slices.Contains(builtinAssignorNames(), name) {
		return usagef("directory name %q is the name of a built-in assignor (%s): choose another", name, strings.Join(builtinAssignorNames(), ", "))
	}
	if err := emptyOrAbsent(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	written, err := scaffold.Write(dir, lang, name, scaffold.Options{GoModule: module})
	if err != nil {
		return fmt.Errorf("writing the project to %s: %w", dir, err)
	}
	fmt.Fprintf(e.stdout, "wrote a plugin project in %s for the assignor %s to %s (%d files)\n", lang, name, dir, len(written))
	if lang == "go" {
		if module == "" {
			module = scaffold.GoModulePath(name)
		}
		// A derived path is not the directory's name: say what it is.
		fmt.Fprintf(e.stdout, "its Go module path is %s (--module sets another)\n", module)
	}
	fmt.Fprintln(e.stdout)
	fmt.Fprintf(e.stdout, "next:\n  make -C %s\n  wasmassign inspect %s\n  wasmassign simulate --plugin %s --assignor %s --scenario SCENARIO.json --format table\n",
		dir, filepath.Join(dir, name+".wasm"), filepath.Join(dir, name+".wasm"), name)
	return nil
}

// emptyOrAbsent is nil when dir does not exist or is an empty directory.
func emptyOrAbsent(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return usagef("%s exists and is not a directory", dir)
		}
		return usagef("directory %s: %v", dir, err)
	case len(entries) > 0:
		return usagef("directory %s is not empty (it holds %s)", dir, entries[0].Name())
	}
	return nil
}
