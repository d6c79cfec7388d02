package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/wasmassign/wasmassign/admin"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/picture"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// adminSource answers the admin API from the running daemon.
type adminSource struct{ d *daemon }

// Ready is true once the upstream answers and plugins are loaded.
func (s *adminSource) Ready(ctx context.Context) error {
	if len(s.d.registry.Assignors()) == 0 {
		return errors.New("no plugins loaded")
	}
	if err := s.d.client.Ping(ctx); err != nil {
		return fmt.Errorf("upstream unreachable: %w", err)
	}
	return nil
}

// Plugins lists each loaded module once, with the assignors it serves now.
func (s *adminSource) Plugins() []admin.Plugin {
	byName := map[string]*admin.Plugin{}
	var order []string
	for _, a := range s.d.registry.Assignors() {
		name := a.Plugin.Name()
		p, ok := byName[name]
		if !ok {
			info := a.Plugin.Info()
			p = &admin.Plugin{Name: strings.TrimPrefix(name, "builtin:"), File: name,
				ABIVersion: uint32(info.ABIVersion), Status: "ok", Builtin: a.Builtin}
			byName[name] = p
			order = append(order, name)
		}
		p.Assignors = append(p.Assignors, a.Info.Name)
	}
	out := make([]admin.Plugin, 0, len(order))
	for _, name := range order {
		slices.Sort(byName[name].Assignors)
		out = append(out, *byName[name])
	}
	return out
}

// Groups lists every group the coordinator holds.
func (s *adminSource) Groups() []admin.GroupSummary {
	var out []admin.GroupSummary
	for _, g := range s.d.driver.Export() {
		sum := admin.GroupSummary{Group: g.Group, State: g.State, Generation: g.Generation, Members: len(g.Members)}
		if r, ok := s.d.driver.LastRebalance(g.Group); ok {
			sum.Assignor = r.Assignor
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
	for _, g := range s.d.driver.Export() {
		if g.Group == id {
			return g, true
		}
	}
	return coordinator.GroupState{}, false
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
