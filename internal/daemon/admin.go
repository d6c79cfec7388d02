package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/admin"
	"github.com/wasmassign/wasmassign/internal/cluster"
	"github.com/wasmassign/wasmassign/internal/picture"
	"github.com/wasmassign/wasmassign/internal/pluginreload"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// adminSource answers the admin API from the running daemon.
type adminSource struct {
	d *Daemon

	mu      sync.Mutex
	digests map[string]string // of built-in plugins, by plugin name
}

// Ready is true once the upstream answers and plugins are loaded.
func (s *adminSource) Ready(ctx context.Context) error {
	if len(s.d.registry.Assignors()) == 0 {
		return errors.New("no plugins loaded")
	}
	if err := s.d.client.Ping(ctx); err != nil {
		return fmt.Errorf("upstream unreachable: %w", err)
	}
	if s.d.view != nil {
		// A load balancer in front of the gateways sends clients only to
		// those that answer for some groups.
		if s.d.view.leaving.Load() {
			return errors.New("shutting down: handing this gateway's groups to the others")
		}
		if !slices.ContainsFunc(s.d.manager.Status().Shards, func(sh cluster.ShardStatus) bool { return sh.State == cluster.ShardServing }) {
			return errors.New("gateway cluster: this gateway serves no shard yet (none given, or still loading)")
		}
	}
	return nil
}

// Cluster implements admin.Source.
func (s *adminSource) Cluster() (admin.Cluster, bool) {
	if s.d.view == nil {
		return admin.Cluster{}, false
	}
	st := s.d.manager.Status()
	c := admin.Cluster{Name: st.Name, Gateway: st.ID, Generation: st.Generation, Leaving: s.d.view.leaving.Load(),
		LayoutChangedAt: timeOrNil(st.LayoutAt), MovedAt: timeOrNil(st.MovedAt)}
	for _, o := range st.Gateways {
		c.Gateways = append(c.Gateways, admin.ClusterGateway{ID: o.ID, Address: o.Address, Admin: o.Admin, Shards: o.Shards, Refused: o.Refused})
	}
	for _, sh := range st.Shards {
		c.Shards = append(c.Shards, admin.ClusterShard{Shard: sh.Shard, State: sh.State, Since: sh.Since})
	}
	for _, g := range s.d.driver.Groups() {
		c.Groups = append(c.Groups, admin.ClusterGroup{Group: g, Shard: s.d.manager.ShardOf(g)})
	}
	return c, true
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Plugins lists each loaded module once, with the assignors it serves now,
// its digest, and the reload status of its file; then the plugin files
// whose every version failed to load.
func (s *adminSource) Plugins() []admin.Plugin {
	var listed []pluginreload.File
	if s.d.reloader != nil {
		listed = s.d.reloader.Files()
	}
	files := map[string]pluginreload.File{}
	for _, f := range listed {
		files[f.Path] = f
	}
	byPlugin := map[*wasmruntime.Plugin]*admin.Plugin{}
	var order []*wasmruntime.Plugin
	for _, a := range s.d.registry.Assignors() {
		p, ok := byPlugin[a.Plugin]
		if !ok {
			p = s.describe(a, files)
			byPlugin[a.Plugin] = p
			order = append(order, a.Plugin)
		}
		p.Assignors = append(p.Assignors, a.Info.Name)
	}
	pool := s.d.host.PoolStats()
	out := make([]admin.Plugin, 0, len(order))
	for _, p := range order {
		slices.Sort(byPlugin[p].Assignors)
		in := pool.Plugins[p.Name()]
		byPlugin[p].Instances = admin.Instances{Busy: in.Busy, Idle: in.Idle, Idling: in.Idling, Queued: in.Queued}
		out = append(out, *byPlugin[p])
	}
	for _, f := range listed {
		if f.Serving == nil {
			out = append(out, admin.Plugin{Name: pluginName(f.Path), File: f.Path, SHA256: f.SHA256,
				Assignors: []string{}, Status: f.Status, LastError: f.LastError})
		}
	}
	return out
}

// describe is the admin view of a's plugin, without its assignors.
// Pool reports the plugin host's pool.
func (s *adminSource) Pool() admin.Pool {
	p := s.d.host.PoolStats()
	return admin.Pool{Size: p.Size, Busy: p.Busy, Idle: p.Idle, Idling: p.Idling, Starting: p.Starting, Queued: p.Queued,
		Waits: p.Waits, WaitSeconds: p.WaitTotal.Seconds(), WaitMaxSeconds: p.WaitMax.Seconds(), Overloads: p.Overloads}
}

func (s *adminSource) describe(a *wasmruntime.Assignor, files map[string]pluginreload.File) *admin.Plugin {
	name := a.Plugin.Name()
	p := &admin.Plugin{Name: pluginName(name), File: name, ABIVersion: uint32(a.Plugin.Info().ABIVersion), Status: "ok", Builtin: a.Builtin}
	if a.Builtin {
		p.SHA256 = s.builtinDigest(name)
		return p
	}
	if s.d.reloader != nil {
		p.SHA256, _ = s.d.reloader.Digest(a.Plugin)
	}
	if f, ok := files[name]; ok {
		if f.Serving == a.Plugin {
			p.Status, p.LastError = f.Status, f.LastError
		} else {
			// An older version, kept for assignors a group uses that the
			// file's current content no longer provides.
			p.Status, p.LastError = pluginreload.StatusRemoved, "an older version of the file, kept because groups use its assignors"
		}
	}
	return p
}

// builtinDigest returns the SHA-256 of an embedded plugin, named
// builtin:NAME, computing it once.
func (s *adminSource) builtinDigest(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.digests[name]; ok {
		return d
	}
	b, err := fs.ReadFile(builtin.FS(), strings.TrimPrefix(name, "builtin:")+".wasm")
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	if s.digests == nil {
		s.digests = map[string]string{}
	}
	s.digests[name] = hex.EncodeToString(sum[:])
	return s.digests[name]
}

// pluginName is a plugin's short name: its file name without .wasm.
func pluginName(file string) string {
	return strings.TrimSuffix(filepath.Base(strings.TrimPrefix(file, "builtin:")), ".wasm")
}

// Groups lists every group the coordinator holds.
func (s *adminSource) Groups() []admin.GroupSummary {
	var out []admin.GroupSummary
	for _, g := range s.d.driver.Overviews() {
		sum := admin.GroupSummary{Group: g.Group, State: g.State, Generation: g.Generation, Members: g.Members}
		if g.HasLast {
			sum.Assignor = g.Last.Assignor
		}
		out = append(out, sum)
	}
	return out
}

// Group describes one group, with what each member holds now.
func (s *adminSource) Group(id string) (admin.Group, bool) {
	g, ok := s.state(id)
	if !ok {
		return admin.Group{}, false
	}
	out := admin.Group{Group: g.Group, State: g.State, Generation: g.Generation, Protocol: g.Protocol, RebalanceProtocol: "eager"}
	if r, ok := s.d.driver.LastRebalance(id); ok {
		out.Assignor = r.Assignor
		if r.Cooperative {
			out.RebalanceProtocol = "cooperative"
		}
		out.LastRebalance = &admin.LastRebalance{At: r.At.UTC(), DurationMS: r.Duration.Milliseconds(), Moved: r.Moved, Withheld: r.Withheld, Fallback: r.Fallback}
	}
	for _, m := range g.Members {
		am := admin.Member{MemberID: m.MemberID, ClientID: m.ClientID, Host: strings.TrimPrefix(m.ClientHost, "/"), Rack: m.Rack, Assignment: m.Assigned}
		if m.InstanceID != "" {
			inst := m.InstanceID
			am.InstanceID = &inst
		}
		out.Members = append(out.Members, am)
	}
	return out, true
}

// GroupSVG draws the group's current assignment.
func (s *adminSource) GroupSVG(w io.Writer, id string) (bool, error) {
	g, ok := s.state(id)
	if !ok {
		return false, nil
	}
	req, resp := pictureOf(g)
	title := fmt.Sprintf("group %s, generation %d, %s", g.Group, g.Generation, g.State)
	return true, picture.WriteSVG(w, req, resp, picture.Options{Title: title})
}

func (s *adminSource) state(id string) (coordinator.GroupState, bool) {
	return s.d.driver.ExportGroup(id)
}

// pictureOf turns a group's state into the request and response the
// picture package draws. Replica placement is not part of the state, so
// cells are coloured as unknown locality.
func pictureOf(g coordinator.GroupState) (*abi.Request, *abi.Response) {
	req := &abi.Request{GroupID: g.Group, Generation: g.Generation}
	topicIndex := map[string]int32{}
	var names []string
	for _, m := range g.Members {
		for t := range m.Assigned {
			if _, ok := topicIndex[t]; !ok {
				topicIndex[t] = 0
				names = append(names, t)
			}
		}
	}
	slices.Sort(names)
	for i, n := range names {
		topicIndex[n] = int32(i)
		req.Topics = append(req.Topics, abi.Topic{Name: n, Exists: true})
	}
	resp := &abi.Response{}
	for i, m := range g.Members {
		req.Members = append(req.Members, abi.Member{MemberID: m.MemberID, InstanceID: m.InstanceID, Rack: m.Rack})
		ma := abi.MemberAssignment{Member: int32(i)}
		for t, ps := range m.Assigned {
			ma.Partitions = append(ma.Partitions, abi.TopicPartitions{Topic: topicIndex[t], Partitions: ps})
		}
		resp.Members = append(resp.Members, ma)
	}
	return req, resp
}
