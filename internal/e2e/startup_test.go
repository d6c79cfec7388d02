package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

// TestStartup_AModuleTheHostRejectsStaysOutAndTheDaemonBecomesReady starts
// the daemon on a plugin directory holding a plugin and a module whose
// compilation outlasts a one-second compile_timeout. The daemon becomes
// ready within a few seconds, serves the good plugin, and lists the other
// as failed, naming the compile timeout.
func TestStartup_AModuleTheHostRejectsStaysOutAndTheDaemonBecomesReady(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	// The daemon shares the user's compilation cache, which may hold the
	// bomb compiled by an earlier, patient run: a custom section makes
	// these bytes new to it.
	bomb := testutil.ReadArtefact(t, "testdata/hostile/compile-bomb.wasm") // assignor hostile-compile-bomb
	payload := append([]byte{4}, fmt.Sprintf("once%016x", time.Now().UnixNano())...)
	bomb = append(append(bomb, 0, byte(len(payload))), payload...)
	brokers, dir, plugins := clusterWithPlugins(t, map[string][]byte{
		"bomb.wasm": bomb,
		"rr.wasm":   testutil.ReadArtefact(t, "testdata/guests/c/roundrobin.wasm"), // assignor c-roundrobin
	})
	cfg := testutil.GatewayConfig{
		Brokers: brokers,
		Groups:  []testutil.GroupRule{{Match: "*", Assignor: "c-roundrobin"}},
		Extra:   fmt.Sprintf("[plugins]\ndir = %q\ncompile_timeout = \"1s\"\n", plugins),
	}.String()
	start := time.Now()
	d := startDaemon(t, dir, cfg)
	for {
		code, body, err := upGet(ctx, d, "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the daemon never became ready: %d %q %v", code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("ready after %s with a compile timeout of 1s", took)
	}
	_, body, err := upGet(ctx, d, "/v1/plugins")
	if err != nil {
		t.Fatal(err)
	}
	var listed []struct {
		File      string   `json:"file"`
		Status    string   `json:"status"`
		LastError string   `json:"last_error"`
		Assignors []string `json:"assignors"`
	}
	if err := json.Unmarshal([]byte(body), &listed); err != nil {
		t.Fatalf("/v1/plugins: %v: %s", err, body)
	}
	seen := map[string]bool{}
	for _, p := range listed {
		switch filepath.Base(p.File) {
		case "bomb.wasm":
			seen["bomb"] = true
			if p.Status != "failed" || !strings.Contains(p.LastError, "compile timeout") {
				t.Errorf("bomb.wasm listed as %q, %q; want failed, naming the compile timeout", p.Status, p.LastError)
			}
		case "rr.wasm":
			seen["rr"] = true
			if p.Status != "ok" || len(p.Assignors) != 1 || p.Assignors[0] != "c-roundrobin" {
				t.Errorf("rr.wasm listed as %q serving %v; want ok serving c-roundrobin", p.Status, p.Assignors)
			}
		}
	}
	if !seen["bomb"] || !seen["rr"] {
		t.Fatalf("/v1/plugins lacks a file: %s", body)
	}
}
