package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// debugDir is $WASMASSIGN_E2E_DEBUG, a directory, or "". When it is set,
// the gateways a test starts log at debug level, the Java consumers log
// their group coordination and their network client at debug level, and a
// failed test keeps every process's whole log there (keepLog): a failure
// seen once in many runs can then be read request by request.
func debugDir() string { return os.Getenv("WASMASSIGN_E2E_DEBUG") }

// debugLogSection is the [log] table of a gateway's config under
// WASMASSIGN_E2E_DEBUG, or "".
func debugLogSection() string {
	if debugDir() == "" {
		return ""
	}
	return "[log]\nlevel = \"debug\"\n"
}

// keepLog writes text, the whole log of one process of a failed test,
// to debugDir, and returns the file's path; "" when the knob is unset or
// the file cannot be written (the failure log's tail is still there).
func keepLog(t testing.TB, process, text string) string {
	dir := debugDir()
	if dir == "" {
		return ""
	}
	name := strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(t.Name() + "-" + process)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("WASMASSIGN_E2E_DEBUG: %v", err)
		return ""
	}
	f, err := os.CreateTemp(dir, name+"-*.log")
	if err != nil {
		t.Logf("WASMASSIGN_E2E_DEBUG: %v", err)
		return ""
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Logf("WASMASSIGN_E2E_DEBUG: %v", err)
		return ""
	}
	return f.Name()
}

// keptNote is the failure log's pointer to a kept log, or "".
func keptNote(path string) string {
	if path == "" {
		return ""
	}
	return " (whole log: " + filepath.Clean(path) + ")"
}
