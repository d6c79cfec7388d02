package scaffold

import (
	"errors"
	"fmt"
	"strings"
)

// The assignor name doubles as the project's name in each language's own
// files, and each language has rules of its own for those: a name that is a
// fine assignor name can still be one the go command, Cargo or npm refuses.
// The functions here turn any string into a name the language accepts, so
// that Write never writes a project that cannot build, whatever it is given.
// They change a name only as far as its language makes them: a name that is
// already acceptable comes out as it went in, or (Go) behind a fixed prefix.

// GoModulePath derives the module path of a Go project from its assignor
// name: example/NAME, lowercased, with every character other than letters,
// digits, '-', '.' and '_' turned into '-', and "plugin-" in front of a
// Windows device name such as aux, which the go command refuses in any
// path. The go command reserves a first path element without
// a dot for the standard library ("go", "std" and "fmt" all fail, each in
// its own way), except example and test, which it leaves to users for
// modules that are never fetched, such as a plugin's; a domain-like first
// element would claim a domain the project may not own. The result always
// passes CheckGoModulePath.
func GoModulePath(name string) string {
	// No '~', which would need the Windows short-name rule as well.
	elem := spell(name, "-._")
	if windowsReserved(elem) {
		elem = "plugin-" + elem
	}
	return "example/" + elem
}

// CheckGoModulePath reports why path cannot be a Go project's module path,
// or nil when it can. It applies the go command's rules for the path of a
// module that others fetch, less the one that its first element name a host
// (a plugin's module is never fetched), and the go command's reservation of
// first elements without a dot for the standard library, so that a path it
// accepts builds today and cannot collide with a standard package later.
func CheckGoModulePath(path string) error {
	if path == "" {
		return errors.New("empty")
	}
	for _, r := range path {
		if r != '/' && !isModulePathChar(r) {
			return fmt.Errorf("invalid character %q: a module path holds ASCII letters, digits, '-', '.', '_' and '~', in elements separated by '/'", r)
		}
	}
	elems := strings.Split(path, "/")
	for _, elem := range elems {
		if err := checkModulePathElem(elem); err != nil {
			return err
		}
	}
	first := elems[0]
	if !strings.Contains(first, ".") {
		if first == "example" || first == "test" {
			return nil
		}
		return fmt.Errorf("first path element %q has no dot, and the go command reserves such paths for the standard library (except example and test): use a domain, as in example.com/%s, or example/%s", first, path, path)
	}
	for _, r := range first {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Errorf("first path element %q is not a domain name: use lowercase letters, digits, '-' and '.'", first)
		}
	}
	return nil
}

// checkModulePathElem checks one element of a module path.
func checkModulePathElem(elem string) error {
	switch {
	case elem == "":
		return errors.New("empty path element: a module path has no leading, trailing or doubled '/'")
	case strings.Trim(elem, ".") == "":
		return fmt.Errorf("path element %q is only dots", elem)
	case elem[0] == '.':
		return fmt.Errorf("path element %q starts with a dot", elem)
	case elem[len(elem)-1] == '.':
		return fmt.Errorf("path element %q ends with a dot", elem)
	case elem[0] == '-':
		// The go command takes a leading dash for a flag.
		return fmt.Errorf("path element %q starts with a dash", elem)
	case windowsReserved(elem):
		return fmt.Errorf("path element %q is a reserved file name on Windows, which the go command refuses everywhere", elem)
	case windowsShortName(elem):
		return fmt.Errorf("path element %q ends in '~' and digits, like a Windows short file name, which the go command refuses", elem)
	}
	return nil
}

// isModulePathChar reports whether r may appear in a module path element.
func isModulePathChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		r == '-' || r == '.' || r == '_' || r == '~'
}

// windowsReserved reports whether a path element names one of Windows'
// device files (aux, con, com1 and the like), with or without an extension:
// the go command refuses such an element on every system, so that a module
// unpacks on all of them.
func windowsReserved(elem string) bool {
	short, _, _ := strings.Cut(elem, ".")
	switch strings.ToLower(short) {
	case "con", "prn", "aux", "nul":
		return true
	}
	if len(short) == 4 {
		dev, n := strings.ToLower(short[:3]), short[3]
		return (dev == "com" || dev == "lpt") && n >= '0' && n <= '9'
	}
	return false
}

// windowsShortName reports whether a path element looks like a Windows
// short name (an ending '~' and digits), which the go command also refuses.
func windowsShortName(elem string) bool {
	short, _, _ := strings.Cut(elem, ".")
	i := strings.LastIndexByte(short, '~')
	if i < 0 || i == len(short)-1 {
		return false
	}
	return strings.Trim(short[i+1:], "0123456789") == ""
}

// crateName turns an assignor name into a Cargo package name: lowercase
// letters, digits, '-' and '_' ('.' and anything else become '-'), starting
// with a letter. "plugin-" goes in front of a name that starts with a
// digit, which Cargo refuses, and of one Cargo takes but should not be given:
// a Rust keyword or a standard crate's name (cargo new refuses both, and the
// package name would become the crate's if the library lost its own name),
// and "wasmassign", the name of the SDK the project depends on, which Cargo
// cannot tell from the project's own in its lockfile.
func crateName(name string) string {
	c := spell(name, "-_")
	if c[0] >= '0' && c[0] <= '9' || rustReserved(strings.ReplaceAll(c, "-", "_")) || c == "wasmassign" {
		return "plugin-" + c
	}
	return c
}

// rustReserved reports whether ident is a Rust keyword, strict or reserved,
// in any edition, or the name of a crate the toolchain ships. Cargo treats
// '-' in a package name as '_' in the crate's, so the caller replaces it.
func rustReserved(ident string) bool {
	switch ident {
	case "abstract", "as", "async", "await", "become", "box", "break", "const",
		"continue", "crate", "do", "dyn", "else", "enum", "extern", "false",
		"final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro",
		"match", "mod", "move", "mut", "override", "priv", "pub", "ref",
		"return", "self", "static", "struct", "super", "trait", "true", "try",
		"type", "typeof", "unsafe", "unsized", "use", "virtual", "where",
		"while", "yield",
		"alloc", "core", "proc_macro", "std", "test":
		return true
	}
	return false
}

// npmName turns an assignor name into the name of package.json: lowercase
// letters, digits, '-', '.' and '_' (anything else becomes '-'), starting
// with a letter or digit, as npm requires of a new package (it refuses a
// leading '.' or '_' and uppercase). npm forbids "node_modules" and
// "favicon.ico" outright; "plugin-" goes in front of those.
func npmName(name string) string {
	n := spell(name, "-._")
	if n == "node_modules" || n == "favicon.ico" {
		return "plugin-" + n
	}
	return n
}

// spell is name as a language's project name: its ASCII letters lowercased,
// every character other than those, digits and the ones in punct turned
// into '-', punctuation trimmed from both ends, and "plugin" for what is
// left empty. Only ASCII is lowercased: Unicode's case rules would turn some
// non-ASCII letters into ASCII ones, which is no way to spell a name.
func spell(name, punct string) string {
	s := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(punct, r) {
			return r
		}
		return '-'
	}, name)
	if s = strings.Trim(s, "-._"); s == "" {
		return "plugin"
	}
	return s
}
