package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// rangeByRoundRobin is the C round-robin guest with its assignor named
// "range": in the plugin directory it replaces the built-in range, and a
// group's partitions show which of the two assigned them.
const rangeByRoundRobin = "internal/pluginreload/testdata/range-by-roundrobin.wasm"

// stride returns the step between the partitions every member holds, when
// it is the same for all: 1 for range, the member count for round robin;
// 0 when the members' shares have no common step.
func stride(owned map[string][]kfakegroup.TopicPartition) int32 {
	step := int32(-1)
	for _, tps := range owned {
		var ps []int32
		for _, tp := range tps {
			ps = append(ps, tp.Partition)
		}
		slices.Sort(ps)
		for i := 1; i < len(ps); i++ {
			d := ps[i] - ps[i-1]
			if step != -1 && d != step {
				return 0
			}
			step = d
		}
	}
	return step
}

type pluginJSON struct {
	Name       string   `json:"name"`
	File       string   `json:"file"`
	SHA256     string   `json:"sha256"`
	ABIVersion uint32   `json:"abi_version"`
	Assignors  []string `json:"assignors"`
	Status     string   `json:"status"`
	LastError  string   `json:"last_error"`
}

func filePlugin(t *testing.T, admin, file string) (pluginJSON, bool) {
	t.Helper()
	var ps []pluginJSON
	getJSON(t, "http://"+admin+"/v1/plugins", &ps)
	var found pluginJSON
	ok := false
	for _, p := range ps {
		if len(p.SHA256) != 64 {
			t.Errorf("/v1/plugins: %s has sha256 %q", p.File, p.SHA256)
		}
		if p.File == file {
			found, ok = p, true
		}
	}
	return found, ok
}

func reloadFailures(t *testing.T, admin string) string {
	t.Helper()
	if v, ok := metricValue(t, admin, `wasmassign_plugin_reloads_total{result="failed"}`); ok {
		return v
	}
	return "0"
}

// TestServe_HotReloadReplacesAPluginForTheNextAssignment runs the daemon
// with a plugin directory and a group of kgo consumers assigned by "range".
// A file replacing range, written in two halves, serves its group's next
// assignment; a half-written and a corrupt version are ignored while the
// good one keeps serving; removing the file keeps it, since the group uses
// it.
func TestServe_HotReloadReplacesAPluginForTheNextAssignment(t *testing.T) {
	dir := t.TempDir()
	d := startServe(t, strings.Replace(serveConfig, `[[groups]]
match = "ranked-*"`, fmt.Sprintf(`[plugins]
dir = %q

[[groups]]
match = "reload-*"
assignor = "range"
rebalance_on_reload = true
initial_rebalance_delay = "0s"
min_session_timeout = "1s"

[[groups]]
match = "ranked-*"`, dir), 1))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rig := kfakegroup.NewRig([]string{d.bootstrap}, "reload-orders", []string{"events"}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	waitStride := func(members int, want int32) {
		t.Helper()
		err := kfakegroup.WaitFor(ctx, func() error {
			owned := l.Owned()
			if len(owned) != members {
				return fmt.Errorf("owners %v", owned)
			}
			if err := kfakegroup.NoSharedOwnership(owned); err != nil {
				return err
			}
			if err := kfakegroup.Covers(owned, map[string]int32{"events": 6}); err != nil {
				return err
			}
			if s := stride(owned); s != want {
				return fmt.Errorf("shares %v have stride %d, want %d", owned, s, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b"} {
		if _, err := rig.Start(n, kfakegroup.ConsumerOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitStride(2, 1) // the built-in range

	// A new plugin, written in two halves one second apart.
	file := filepath.Join(dir, "custom-range.wasm")
	good := testutil.ReadArtefact(t, rangeByRoundRobin)
	sum := sha256.Sum256(good)
	goodSum := hex.EncodeToString(sum[:])
	if err := os.WriteFile(file, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(good[len(good)/2:])
	f.Close()
	written := time.Now()
	for {
		if p, ok := filePlugin(t, d.admin, file); ok && p.SHA256 == goodSum && p.Status == "ok" {
			if !slices.Equal(p.Assignors, []string{"range"}) || p.ABIVersion != 1 || p.Name != "custom-range" {
				t.Errorf("/v1/plugins shows %+v", p)
			}
			break
		}
		if time.Since(written) > 5*time.Second {
			t.Fatal("the new plugin does not serve 5s after its second half")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// rebalance_on_reload: the group's next assignment, without any
	// member joining, comes from the new plugin.
	waitStride(2, 2)
	if n := reloadFailures(t, d.admin); n != "0" {
		t.Fatalf("%s reload failures counted for a valid file written in halves", n)
	}

	// A half-written version is not loaded, and counts nothing while a
	// writer may still come back.
	if err := os.WriteFile(file, good[:len(good)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if p, _ := filePlugin(t, d.admin, file); p.SHA256 != goodSum || p.Status != "ok" {
		t.Fatalf("after a half write /v1/plugins shows %+v", p)
	}
	if n := reloadFailures(t, d.admin); n != "0" {
		t.Fatalf("a half-written file counted %s failures", n)
	}

	// A corrupt version fails, is reported, and the good one keeps serving.
	if err := os.WriteFile(file, []byte("\x00asm\x01\x00\x00\x00\x01\x03\xff\xff\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = kfakegroup.WaitFor(ctx, func() error {
		p, _ := filePlugin(t, d.admin, file)
		if p.Status != "failed" || p.LastError == "" || p.SHA256 != goodSum {
			return fmt.Errorf("/v1/plugins shows %+v", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := reloadFailures(t, d.admin); n != "1" {
		t.Errorf("reload failures = %s after one corrupt file, want 1", n)
	}
	// A third member's join runs the good version: round robin over three.
	if _, err := rig.Start("c", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStride(3, 3)

	// Removing the file keeps its last good version: the group uses range.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	err = kfakegroup.WaitFor(ctx, func() error {
		p, _ := filePlugin(t, d.admin, file)
		if p.Status != "removed" || p.SHA256 != goodSum || !slices.Equal(p.Assignors, []string{"range"}) {
			return fmt.Errorf("/v1/plugins shows %+v", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
