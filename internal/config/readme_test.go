package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// readmeConfig returns the TOML block of the README's Configuration section.
func readmeConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Configuration")
	if i < 0 {
		t.Fatal("README.md has no Configuration section")
	}
	doc = doc[i:]
	start := strings.Index(doc, "```toml\n")
	end := strings.Index(doc[start+1:], "\n```")
	if start < 0 || end < 0 {
		t.Fatal("the Configuration section has no toml block")
	}
	return doc[start+len("```toml\n") : start+1+end]
}

// tomlKeys lists the dotted keys of a struct's toml tags, tables included.
func tomlKeys(prefix string, typ reflect.Type, keys map[string]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("toml")
		if name == "" {
			continue
		}
		keys[prefix+name] = true
		tomlKeys(prefix+name+".", f.Type, keys)
	}
}

func TestReadme_DocumentsEveryConfigKeyAndItsExampleParses(t *testing.T) {
	text := readmeConfig(t)
	if _, err := Parse([]byte(text), "README.md", t.TempDir()); err != nil {
		// The example names a plugin directory that does not exist here;
		// any other complaint means the documented example is wrong.
		if !strings.Contains(err.Error(), "plugins.dir") {
			t.Fatalf("the README's example does not parse: %v", err)
		}
	}
	documented := map[string]bool{}
	table := ""
	header := regexp.MustCompile(`^\[\[?([a-z_.]+)\]\]?`)
	key := regexp.MustCompile(`^([a-z_]+)\s*=`)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if m := header.FindStringSubmatch(line); m != nil {
			table = m[1]
			documented[table] = true
			continue
		}
		if m := key.FindStringSubmatch(line); m != nil {
			documented[table+"."+m[1]] = true
		}
	}
	keys := map[string]bool{}
	tomlKeys("", reflect.TypeOf(file{}), keys)
	for k := range keys {
		if !documented[k] {
			t.Errorf("config key %s is not in the README's Configuration example", k)
		}
	}
	if len(keys) < 30 {
		t.Fatalf("found only %d keys in the file struct; the reflection walk is broken", len(keys))
	}
}
