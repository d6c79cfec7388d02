package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type fakeSource struct {
	ready   error
	groups  map[string]Group
	cluster *Cluster
}

func (f *fakeSource) Cluster() (Cluster, bool) {
	if f.cluster == nil {
		return Cluster{}, false
	}
	return *f.cluster, true
}

func (f *fakeSource) Ready(context.Context) error { return f.ready }
func (f *fakeSource) Plugins() []Plugin {
	return []Plugin{{Name: "range", File: "builtin:range.wasm", SHA256: "ab", ABIVersion: 1, Assignors: []string{"range"}, Status: "ok", Builtin: true}}
}
func (f *fakeSource) Pool() Pool {
	return Pool{Size: 2, Busy: 1, Idle: 1, Queued: 3, Waits: 9, WaitSeconds: 1.5, WaitMaxSeconds: 0.5, Overloads: 1}
}
func (f *fakeSource) Groups() []GroupSummary {
	var out []GroupSummary
	for id, g := range f.groups {
		out = append(out, GroupSummary{Group: id, State: g.State, Generation: g.Generation, Members: len(g.Members)})
	}
	return out
}
func (f *fakeSource) Group(id string) (Group, bool) { g, ok := f.groups[id]; return g, ok }
func (f *fakeSource) GroupSVG(w io.Writer, id string) (bool, error) {
	if _, ok := f.groups[id]; !ok {
		return false, nil
	}
	_, err := io.WriteString(w, `<svg xmlns="http://www.w3.org/2000/svg"></svg>`)
	return true, err
}

func newFake() *fakeSource {
	inst := "i1"
	return &fakeSource{groups: map[string]Group{
		"g": {Group: "g", State: "Stable", Generation: 7, Protocol: "cooperative-sticky", Assignor: "cooperative-sticky", RebalanceProtocol: "cooperative",
			Members:       []Member{{MemberID: "m1", InstanceID: &inst, ClientID: "app", Host: "127.0.0.1", Rack: "az-a", Assignment: map[string][]int32{"demo": {0, 1}}}},
			LastRebalance: &LastRebalance{At: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), DurationMS: 12, Moved: 2, Withheld: 2}},
		"empty/one": {Group: "empty/one", State: "Empty", Generation: 3},
	}}
}

func get(t *testing.T, h http.Handler, path, token string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result(), rec.Body.String()
}

func TestGroup_HasTheDocumentedFields(t *testing.T) {
	h := NewHandler(newFake(), Options{})
	resp, body := get(t, h, "/v1/groups/g", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"group", "state", "generation", "protocol", "assignor", "rebalance_protocol", "members", "last_rebalance"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing field %q in %s", k, body)
		}
	}
	m := doc["members"].([]any)[0].(map[string]any)
	for _, k := range []string{"member_id", "instance_id", "client_id", "host", "rack", "assignment"} {
		if _, ok := m[k]; !ok {
			t.Errorf("member lacks %q", k)
		}
	}
	lr := doc["last_rebalance"].(map[string]any)
	for _, k := range []string{"at", "duration_ms", "moved", "withheld", "fallback"} {
		if _, ok := lr[k]; !ok {
			t.Errorf("last_rebalance lacks %q", k)
		}
	}
	if _, err := time.Parse(time.RFC3339, lr["at"].(string)); err != nil {
		t.Errorf("at is not RFC3339: %v", err)
	}
}

func TestCluster_HasTheDocumentedFields(t *testing.T) {
	src := newFake()
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	src.cluster = &Cluster{Name: "prod", Gateway: "gw-1", Generation: 4, LayoutChangedAt: &at,
		Gateways: []ClusterGateway{{ID: "gw-1", Address: "10.0.0.1:9092", Admin: "10.0.0.1:9644", Shards: []int{0, 2}}, {ID: "gw-2", Address: "10.0.0.2:9092"}},
		Shards:   []ClusterShard{{Shard: 0, State: "serving", Since: at}, {Shard: 2, State: "loading", Since: at}},
		Groups:   []ClusterGroup{{Group: "orders", Shard: 2}}}
	resp, body := get(t, NewHandler(src, Options{}), "/v1/cluster", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "gateway", "generation", "layout_changed_at", "moved_at", "leaving", "gateways", "shards", "groups"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing field %q in %s", k, body)
		}
	}
	if doc["moved_at"] != nil {
		t.Errorf("moved_at %v, want null for never", doc["moved_at"])
	}
	gw := doc["gateways"].([]any)[1].(map[string]any)
	if shards, ok := gw["shards"].([]any); !ok || len(shards) != 0 {
		t.Errorf("a gateway with no shards lists %v, want []", gw["shards"])
	}
	for _, k := range []string{"id", "address", "shards"} {
		if _, ok := gw[k]; !ok {
			t.Errorf("gateway lacks %q", k)
		}
	}
	sh := doc["shards"].([]any)[1].(map[string]any)
	if sh["state"] != "loading" || sh["shard"] != 2.0 {
		t.Errorf("shard %v", sh)
	}
	if g := doc["groups"].([]any)[0].(map[string]any); g["group"] != "orders" || g["shard"] != 2.0 {
		t.Errorf("group %v", g)
	}
}

func TestEmptyGroup_AnswersWithNoMembersAndAPicture(t *testing.T) {
	h := NewHandler(newFake(), Options{})
	resp, body := get(t, h, "/v1/groups/empty%2Fone", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"members": []`) {
		t.Errorf("status %d body %s", resp.StatusCode, body)
	}
	resp, body = get(t, h, "/v1/groups/empty%2Fone/assignment.svg", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(body, "<svg") {
		t.Errorf("svg: status %d type %q body %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

func TestRoutes_StatusCodes(t *testing.T) {
	notReady := newFake()
	notReady.ready = errors.New("upstream unreachable")
	clustered := newFake()
	clustered.cluster = &Cluster{Name: "prod", Gateway: "gw-1", Gateways: []ClusterGateway{{ID: "gw-1", Address: "10.0.0.1:9092"}}}
	tests := []struct {
		name   string
		src    *fakeSource
		path   string
		status int
		want   string
	}{
		{"healthz", newFake(), "/healthz", 200, "ok"},
		{"ready", newFake(), "/readyz", 200, "ready"},
		{"not ready names the cause", notReady, "/readyz", 503, "upstream unreachable"},
		{"plugins", newFake(), "/v1/plugins", 200, `"abi_version": 1`},
		{"plugin pool", newFake(), "/v1/plugins/pool", 200, `"overloads": 1`},
		{"groups", newFake(), "/v1/groups", 200, `"group": "g"`},
		{"unknown group", newFake(), "/v1/groups/nope", 404, `no managed group \"nope\"`},
		{"unknown group picture", newFake(), "/v1/groups/nope/assignment.svg", 404, "nope"},
		{"unknown route", newFake(), "/v2/x", 404, ""},
		{"no cluster", newFake(), "/v1/cluster", 404, "in no cluster"},
		{"cluster", clustered, "/v1/cluster", 200, `"shards": []`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, NewHandler(tt.src, Options{}), tt.path, "")
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("GET %s: %d %q, want %d containing %q", tt.path, resp.StatusCode, body, tt.status, tt.want)
			}
		})
	}
}

func TestPprof_ServedOnlyWhenAskedFor(t *testing.T) {
	for _, on := range []bool{false, true} {
		resp, body := get(t, NewHandler(newFake(), Options{Pprof: on}), "/debug/pprof/heap?debug=1", "")
		if on && (resp.StatusCode != 200 || !strings.Contains(body, "heap profile")) {
			t.Errorf("pprof on: GET heap %d %.80q, want a heap profile", resp.StatusCode, body)
		}
		if !on && resp.StatusCode != 404 {
			t.Errorf("pprof off: GET heap %d, want 404", resp.StatusCode)
		}
	}
}

func TestToken_ProtectsEverythingButHealthz(t *testing.T) {
	h := NewHandler(newFake(), Options{Token: "s3cret", Pprof: true, Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "m") })})
	for _, path := range []string{"/readyz", "/metrics", "/v1/plugins", "/v1/plugins/pool", "/v1/groups", "/v1/groups/g", "/v1/groups/g/assignment.svg", "/debug/pprof/cmdline", "/debug/pprof/heap"} {
		if resp, _ := get(t, h, path, ""); resp.StatusCode != 401 {
			t.Errorf("%s without token: %d, want 401", path, resp.StatusCode)
		}
		if resp, _ := get(t, h, path, "wrong"); resp.StatusCode != 401 {
			t.Errorf("%s with a wrong token: %d, want 401", path, resp.StatusCode)
		}
		if resp, _ := get(t, h, path, "s3cret"); resp.StatusCode != 200 {
			t.Errorf("%s with the token: %d, want 200", path, resp.StatusCode)
		}
	}
	if resp, _ := get(t, h, "/healthz", ""); resp.StatusCode != 200 {
		t.Errorf("healthz must stay open for probes: %d", resp.StatusCode)
	}
}

func TestServe_StopsWithTheContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, NewHandler(newFake(), Options{}), slog.New(slog.DiscardHandler)) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:9644": true, "localhost:1": true, "[::1]:80": true, "0.0.0.0:9644": false, ":9644": false, "10.0.0.1:1": false, "junk": false} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
