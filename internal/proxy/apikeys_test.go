package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestSource_APIKeysAreNamed holds the whole module, tests included, to
// naming Kafka API keys by kmsg's constants (int16(kmsg.ApiVersions),
// kmsg.Key(key) in a switch) rather than by bare numbers, which say
// nothing and are easily mistyped. The proxy is where keys come off the
// wire, but the rule is the module's, so the test reads every Go file.
//
// It finds a number where an expression named like a key (key, ApiKey,
// s.key, req.Key()) is compared or switched on, set, or passed as a
// parameter named key or k, and where a table indexed by key (has, min,
// max, flexFrom) or a map keyed by int16 is indexed. Negative numbers
// stand for invalid keys and pass, as do comparisons with 0 that bound a
// range.
func TestSource_APIKeysAreNamed(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "../.." && (strings.HasPrefix(d.Name(), "_") || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("read only %d Go files: not the module", len(files))
	}
	params := keyParams(files)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if what := bareKey(n, params); what != "" {
				t.Errorf("%s: API key %s", fset.Position(n.Pos()), what)
			}
			return true
		})
	}
}

// keyName reports whether name is what the module calls an API key.
func keyName(name string) bool {
	switch name {
	case "key", "Key", "apiKey", "ApiKey", "APIKey":
		return true
	}
	return false
}

// keyParams maps the name of every function, and of every function
// literal assigned to a variable, to the positions of its parameters that
// take an API key: those named like one, and int16 parameters named k.
// kmsg's and kfake's functions that take keys are added by hand.
func keyParams(files []*ast.File) map[string][]int {
	params := map[string][]int{"NameForKey": {0}, "RequestForKey": {0}, "ResponseForKey": {0}, "ControlKey": {0}}
	add := func(name string, ft *ast.FuncType) {
		i := 0
		for _, field := range ft.Params.List {
			if len(field.Names) == 0 {
				i++
			}
			for _, id := range field.Names {
				if typ, ok := field.Type.(*ast.Ident); keyName(id.Name) || id.Name == "k" && ok && typ.Name == "int16" {
					params[name] = append(params[name], i)
				}
				i++
			}
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if _, seen := params[n.Name.Name]; !seen {
					add(n.Name.Name, n.Type)
				}
			case *ast.AssignStmt:
				if len(n.Lhs) == 1 && len(n.Rhs) == 1 {
					id, ok := n.Lhs[0].(*ast.Ident)
					if fl, isFunc := n.Rhs[0].(*ast.FuncLit); ok && isFunc {
						if _, seen := params[id.Name]; !seen {
							add(id.Name, fl.Type)
						}
					}
				}
			}
			return true
		})
	}
	return params
}

// bareKey returns what n does with a bare API key number, or "".
func bareKey(n ast.Node, params map[string][]int) string {
	switch n := n.(type) {
	case *ast.BinaryExpr:
		switch n.Op {
		case token.EQL, token.NEQ, token.LSS, token.GTR, token.LEQ, token.GEQ:
		default:
			return ""
		}
		for _, side := range [][2]ast.Expr{{n.X, n.Y}, {n.Y, n.X}} {
			if v, ok := number(side[1]); ok && keyLike(side[0]) && !(v == "0" && (n.Op == token.LSS || n.Op == token.GEQ)) {
				return "compared with " + v
			}
		}
	case *ast.SwitchStmt:
		if n.Tag != nil && keyLike(n.Tag) {
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if v, ok := number(e); ok {
						return "switched on, case " + v
					}
				}
			}
		}
	case *ast.KeyValueExpr:
		if id, ok := n.Key.(*ast.Ident); ok && keyName(id.Name) {
			if v, ok := number(n.Value); ok {
				return "field set to " + v
			}
		}
	case *ast.AssignStmt:
		for i, l := range n.Lhs {
			if len(n.Lhs) != len(n.Rhs) {
				break
			}
			if v, ok := number(n.Rhs[i]); ok && keyLike(l) {
				return "set to " + v
			}
		}
	case *ast.CallExpr:
		name := lastName(n.Fun)
		if fn, ok := n.Fun.(*ast.SelectorExpr); ok && lastName(fn.X) == "kmsg" && name == "Key" && len(n.Args) == 1 {
			if v, ok := number(n.Args[0]); ok {
				return "kmsg.Key(" + v + ")"
			}
		}
		for _, at := range params[name] {
			if at < len(n.Args) {
				if v, ok := number(n.Args[at]); ok {
					return "passed to " + name + " as " + v
				}
			}
		}
	case *ast.IndexExpr:
		switch table := lastName(n.X); table {
		case "has", "min", "max", "flexFrom":
			if v, ok := number(n.Index); ok {
				return "indexing " + table + " as " + v
			}
		}
	case *ast.CompositeLit:
		if mt, ok := n.Type.(*ast.MapType); ok {
			if id, ok := mt.Key.(*ast.Ident); ok && id.Name == "int16" {
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if v, ok := number(kv.Key); ok {
							return "map key " + v
						}
					}
				}
			}
		}
	}
	return ""
}

// lastName returns the name e ends in: x for x and for a.x, else "".
func lastName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// keyLike reports whether e is named like an API key: key, s.key,
// k.ApiKey, req.Key(), or a conversion of one.
func keyLike(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return keyLike(e.X)
	case *ast.Ident, *ast.SelectorExpr:
		return keyName(lastName(e))
	case *ast.CallExpr:
		if s, ok := e.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Key" && len(e.Args) == 0 {
			return true
		}
		if id, ok := e.Fun.(*ast.Ident); ok && len(e.Args) == 1 && (id.Name == "int16" || id.Name == "int") {
			return keyLike(e.Args[0])
		}
	}
	return false
}

// number returns the text of e when it is a non-negative integer literal,
// bare, parenthesised or converted to an integer type.
func number(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return number(e.X)
	case *ast.BasicLit:
		return e.Value, e.Kind == token.INT
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && len(e.Args) == 1 && (id.Name == "int16" || id.Name == "int32" || id.Name == "int") {
			return number(e.Args[0])
		}
	}
	return "", false
}
