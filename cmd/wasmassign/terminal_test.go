package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"

	"github.com/wasmassign/wasmassign/internal/admin"
	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/daemon"
	"github.com/wasmassign/wasmassign/internal/testutil"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// The texts terminal-escape.wasm gives the host (testdata/hostile/README.md).
const (
	escapeModule      = "testdata/hostile/terminal-escape.wasm"
	escapeAssignor    = "hostile-terminal-escape\x1b[31m"
	escapeDescription = "hostile test plugin: terminal-escape\x1b[2J\x1b[H\r\tforged"
)

// rawControl returns the first control character in out other than a
// newline, or -1: what a terminal would act on instead of showing.
func rawControl(out string) rune {
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || r == 0x7f) {
			return r
		}
	}
	return -1
}

// TestInspect_TableEscapesGuestText inspects terminal-escape.wasm, whose
// assignor's name, version, protocol and description and an export's name
// carry escape sequences, a carriage return and a tab: the table shows
// them escaped, and the JSON keeps them exact.
func TestInspect_TableEscapesGuestText(t *testing.T) {
	wasm := testutil.Artefact(t, escapeModule)
	code, stdout, stderr := wasmassign(t, "inspect", "--format", "table", wasm)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	if r := rawControl(stdout); r >= 0 {
		t.Fatalf("the table holds the raw control character %U:\n%q", r, stdout)
	}
	for _, want := range []string{`hostile-terminal-escape\x1b[31m`, `1.0.0\x1b[0m`, `\x1b]0;owned\a`,
		`terminal-escape\x1b[2J\x1b[H\r\tforged`, `extra\x1b[5m`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %s:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = wasmassign(t, "inspect", "--format", "json", wasm)
	if code != 0 {
		t.Fatalf("inspect --format json: exit %d: %s", code, stderr)
	}
	var ins inspection
	if err := json.Unmarshal([]byte(stdout), &ins); err != nil {
		t.Fatal(err)
	}
	if len(ins.Assignors) != 1 || ins.Assignors[0].Name != escapeAssignor || ins.Assignors[0].Description != escapeDescription {
		t.Fatalf("JSON assignors %+v, want the module's texts exactly", ins.Assignors)
	}
}

// TestRun_ErrorLinesEscapeGuestText runs terminal-escape.wasm's assignor,
// which logs a line and answers an error response that both carry escape
// sequences: what the command writes to stderr, its log and its error
// line, holds no raw control character.
func TestRun_ErrorLinesEscapeGuestText(t *testing.T) {
	code, _, stderr := wasmassign(t, "simulate", "--scenario", writeScenario(t, rangeExample),
		"--plugin", testutil.Artefact(t, escapeModule), "--assignor", escapeAssignor)
	if code != 1 {
		t.Fatalf("simulate: exit %d, want 1 for the error response: %s", code, stderr)
	}
	if r := rawControl(stderr); r >= 0 {
		t.Fatalf("stderr holds the raw control character %U:\n%q", r, stderr)
	}
	for _, want := range []string{`no capacity\x1b[2J\x1b[H`, `guest line \x1b[31mred\x1b[0m\r\a`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
}

// TestPlugins_TableEscapesGuestText lists plugins from an admin API whose
// answer carries a guest's assignor name and error: the table shows them
// escaped.
func TestPlugins_TableEscapesGuestText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/plugins/pool" {
			json.NewEncoder(w).Encode(admin.Pool{Size: 2})
			return
		}
		json.NewEncoder(w).Encode([]admin.Plugin{{Name: "p.wasm", File: "/plugins/p.wasm", ABIVersion: 1, Status: "failed",
			Assignors: []string{escapeAssignor}, LastError: "trap: guest said: \x1b[2Jgone\r\tforged"}})
	}))
	defer srv.Close()
	code, stdout, stderr := wasmassign(t, "plugins", "--admin", strings.TrimPrefix(srv.URL, "http://"))
	if code != 0 {
		t.Fatalf("plugins: exit %d: %s", code, stderr)
	}
	if r := rawControl(stdout); r >= 0 {
		t.Fatalf("the table holds the raw control character %U:\n%q", r, stdout)
	}
	for _, want := range []string{`hostile-terminal-escape\x1b[31m`, `\x1b[2Jgone\r\tforged`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %s:\n%s", want, stdout)
		}
	}
}

// TestDaemonLog_GuestTextIsEscaped runs terminal-escape.wasm under the
// daemon's logger, in text and in JSON, in each isolation, and logs the
// call's error as the driver does: the guest's line and message reach the
// log through slog, which escapes them, never as raw bytes.
func TestDaemonLog_GuestTextIsEscaped(t *testing.T) {
	isolations := []wasmruntime.Isolation{wasmruntime.IsolationInProcess}
	if iso := wasmruntime.NewConfig().Isolation(); iso != wasmruntime.IsolationInProcess {
		isolations = append(isolations, iso)
	}
	for _, iso := range isolations {
		for _, format := range []string{"text", "json"} {
			t.Run(fmt.Sprintf("%s/%s", iso, format), func(t *testing.T) {
				var logs bytes.Buffer
				log := daemon.NewLogger(config.Log{Level: "debug", Format: format}, &logs)
				ctx := context.Background()
				h, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig().WithIsolation(iso).WithLogger(log))
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close(ctx)
				p, err := h.LoadFile(ctx, testutil.Artefact(t, escapeModule))
				if err != nil {
					t.Fatal(err)
				}
				req := &abi.Request{GroupID: "g", Protocol: "p", Members: []abi.Member{{MemberID: "m0", OwnedGeneration: -1}}}
				_, err = p.Assign(ctx, escapeAssignor, req)
				if err == nil {
					t.Fatal("the assignor answered; want its error response")
				}
				log.Warn("assignor failed", "assignor", escapeAssignor, "err", err)
				h.Close(ctx) // every line a worker forwards is logged by now
				out := logs.String()
				if r := rawControl(out); r >= 0 {
					t.Fatalf("the log holds the raw control character %U:\n%q", r, out)
				}
				for _, want := range []string{`guest line \u001b[31mred`, `no capacity\u001b[2J`} {
					if format == "text" {
						want = strings.ReplaceAll(want, `\u001b`, `\x1b`)
					}
					if !strings.Contains(out, want) {
						t.Errorf("the log lacks %s:\n%s", want, out)
					}
				}
			})
		}
	}
}

// TestGroups_TablesEscapeClientText: group, member and client ids are the
// clients' own bytes, and `wasmassign groups` prints them, in the list and
// in one group's table, escaped.
func TestGroups_TablesEscapeClientText(t *testing.T) {
	const hostile = "g\x1b[2J"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/groups" {
			json.NewEncoder(w).Encode([]admin.GroupSummary{{Group: hostile, State: "Stable", Generation: 1, Members: 1, Assignor: "range"}})
			return
		}
		json.NewEncoder(w).Encode(admin.Group{Group: hostile, State: "Stable", Generation: 1, Protocol: "range\r",
			Members: []admin.Member{{MemberID: "m\x1b]0;title\x07", ClientID: "c\tforged", Host: "10.0.0.1", Assignment: map[string][]int32{"t": {0}}}}})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, args := range [][]string{{"groups", "--admin", addr}, {"groups", "--admin", addr, "g"}} {
		code, stdout, stderr := wasmassign(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if r := rawControl(stdout); r >= 0 {
			t.Errorf("%v: the output holds the raw control character %U:\n%q", args, r, stdout)
		}
	}
}
