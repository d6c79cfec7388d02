// Package gateway decides, request by request, what the proxy does with the
// consumer-group traffic of the groups wasmassign manages: it answers group
// membership from the coordinator, fences offset commits before they go
// upstream, merges group listings, and lets everything else through.
//
// It sits between the proxy (which calls it through proxy.Interceptor) and
// the coordinator's driver (which it calls through Driver); it does no I/O
// of its own beyond asking the upstream which broker coordinates a group.
// It must never import the runtime, the driver, the daemon or the metrics:
// it reaches the layers it uses through its own interfaces.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/proxy"
	"github.com/wasmassign/wasmassign/internal/upstream"
)

// Driver is what the gateway needs of the coordinator's driver
// (internal/driver): it answers managed groups' requests and keeps the book
// of the racks clients send in Fetch requests.
type Driver interface {
	// Handle passes one request of a managed group to the coordinator and
	// waits for its response.
	Handle(ctx context.Context, client coordinator.Client, req kmsg.Request) (kmsg.Response, error)
	// RecordFetchRack notes the KIP-392 rack a client sent in a Fetch
	// request. It must not block.
	RecordFetchRack(seen coordinator.FetchRack)
}

// CoordinatorLookup answers which upstream brokers coordinate groups
// (*upstream.Client is one).
type CoordinatorLookup interface {
	// CoordinatorsOf returns the node id of each group's coordinator. A
	// group whose lookup failed is missing from the map, and the error
	// says why.
	CoordinatorsOf(ctx context.Context, groups []string) (map[string]int32, error)
	// Forget drops what is remembered of group's coordinator: a request
	// forwarded on a client's connection found it elsewhere.
	Forget(group string)
}

// Ownership says, in a gateway cluster, which gateway answers for a
// managed group now (the daemon's view of internal/cluster's Manager).
type Ownership interface {
	// OwnerOf returns group's owner now. It must not block.
	OwnerOf(group string) Owner
}

// OwnerState is what this gateway may do with a managed group's requests.
type OwnerState int

const (
	// OwnedElsewhere: another gateway answers for the group (or none does
	// yet); its requests get NOT_COORDINATOR, as a Kafka broker that is
	// not the group's coordinator answers.
	OwnedElsewhere OwnerState = iota
	// OwnedLoading: this gateway is taking the group over and has not
	// finished; its requests get COORDINATOR_LOAD_IN_PROGRESS, as Kafka
	// answers while it loads a group's partition.
	OwnedLoading
	// OwnedHere: this gateway answers for the group.
	OwnedHere
)

// Refusal is the error code a request of a group in state s is answered
// with in place of the coordinator's answer; 0 for OwnedHere.
func (s OwnerState) Refusal() int16 {
	switch s {
	case OwnedHere:
		return 0
	case OwnedLoading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return kerr.NotCoordinator.Code
}

// Owner is the gateway that answers for a group, as clients reach it:
// Node is the gateway's node id (a proxy.Peer's), -1 when no gateway owns
// the group yet, or when this gateway owns it as a gateway alone, which is
// no node of its own: clients then find the group where they would
// without a cluster, at the listener of its upstream coordinator.
type Owner struct {
	State OwnerState
	Node  int32
	Host  string
	Port  int32
}

// Upstream sends a request to the upstream broker it belongs to: a
// group's to the group's coordinator (*upstream.Client is one).
type Upstream interface {
	Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Options configure a Gateway.
type Options struct {
	// Manages reports whether the gateway runs group's coordination.
	Manages      func(group string) bool
	Driver       Driver
	Coordinators CoordinatorLookup
	// Ownership, when set, shares the managed groups with the other
	// gateways of a cluster: FindCoordinator names the owner, and the
	// requests of a group another gateway owns are refused. Upstream then
	// carries what the gateway reads upstream for a group it owns.
	Ownership Ownership
	Upstream  Upstream
	// Alone, with Ownership, is a gateway in a cluster of its own: no
	// node of its own (Owner.Node is -1 for its groups), so clients find
	// and list its groups at their upstream coordinators' listeners, as
	// without a cluster, while Ownership still refuses what it does not
	// serve yet.
	Alone  bool
	Logger *slog.Logger
}

// Gateway implements proxy.Interceptor.
type Gateway struct {
	opt Options
	log *slog.Logger
}

// New returns a Gateway.
func New(opt Options) *Gateway {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{opt: opt, log: log}
}

// Intercepts reports the keys the gateway looks at: every group API, and
// FindCoordinator.
func (g *Gateway) Intercepts(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup,
		kmsg.DescribeGroups, kmsg.ListGroups, kmsg.OffsetCommit, kmsg.TxnOffsetCommit,
		kmsg.OffsetFetch, kmsg.DeleteGroups, kmsg.OffsetDelete, kmsg.FindCoordinator:
		return true
	}
	return false
}

// client describes the request's client the way Kafka does in
// DescribeGroups: the header's client id, and the host as "/ip".
func client(r proxy.Request) coordinator.Client {
	c := coordinator.Client{Host: clientHost(r.Conn)}
	if r.ClientID != nil {
		c.ID = *r.ClientID
	}
	return c
}

// Intercept decides one request.
func (g *Gateway) Intercept(ctx context.Context, r proxy.Request) (proxy.Decision, error) {
	switch req := r.Req.(type) {
	case *kmsg.JoinGroupRequest:
		return g.local(ctx, r, req.Group)
	case *kmsg.SyncGroupRequest:
		return g.local(ctx, r, req.Group)
	case *kmsg.HeartbeatRequest:
		return g.local(ctx, r, req.Group)
	case *kmsg.LeaveGroupRequest:
		return g.local(ctx, r, req.Group)
	case *kmsg.OffsetCommitRequest:
		return g.local(ctx, r, req.Group)
	case *kmsg.TxnOffsetCommitRequest:
		return g.local(ctx, r, req.Group)
	case *kmsg.OffsetDeleteRequest:
		return g.local(ctx, r, req.Group)
	case *kmsg.DeleteGroupsRequest:
		return g.deleteGroups(ctx, r, req)
	case *kmsg.DescribeGroupsRequest:
		return g.describeGroups(ctx, r, req)
	case *kmsg.ListGroupsRequest:
		return g.listGroups(ctx, r, req)
	case *kmsg.OffsetFetchRequest:
		return g.offsetFetch(ctx, req)
	case *kmsg.FindCoordinatorRequest:
		return g.findCoordinator(ctx, req)
	}
	return proxy.Decision{}, nil
}

// local answers a single-group request from the coordinator when the group
// is managed, and forwards it untouched otherwise.
func (g *Gateway) local(ctx context.Context, r proxy.Request, group string) (proxy.Decision, error) {
	if !g.opt.Manages(group) {
		return proxy.Decision{}, nil
	}
	if refused := g.notHere(r.Req, group); refused != nil {
		return proxy.Decision{Respond: refused}, nil
	}
	resp, err := g.opt.Driver.Handle(ctx, client(r), r.Req)
	if err != nil {
		return proxy.Decision{}, fmt.Errorf("group %s: %s: %w", group, kmsg.NameForKey(r.Req.Key()), err)
	}
	return proxy.Decision{Respond: resp}, nil
}

// notHere is the answer to req, of group, when another gateway of the
// cluster owns the group, or this one is still taking it over; nil when
// this gateway answers for it.
func (g *Gateway) notHere(req kmsg.Request, group string) kmsg.Response {
	if g.opt.Ownership == nil {
		return nil
	}
	code := g.opt.Ownership.OwnerOf(group).State.Refusal()
	if code == 0 {
		return nil
	}
	return coordinator.ErrorResponse(req, code)
}

// findCoordinator answers the lookup of managed groups' coordinators with
// the brokers the upstream names, as remembered for ListGroups, so that
// ListGroups lists each managed group on the broker FindCoordinator names;
// the proxy turns the node into the gateway's address for it. Transaction
// coordinators and unmanaged groups are looked up upstream as before.
//
// Answering here saves a consumer's start-up an upstream round trip, and
// the dial of the connection kgo asks on (its first request to forward
// opens it): fifty members starting at once otherwise queue fifty lookups
// of one group behind each other at the broker, and the later ones join
// the group later. Which broker a client takes for the coordinator does
// not matter to the gateway, which answers group requests on every
// connection; the upstream's is named so that the answers agree with
// ListGroups and with the upstream itself.
//
// A group whose coordinator cannot be learnt gets COORDINATOR_NOT_AVAILABLE,
// which clients retry.
func (g *Gateway) findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (proxy.Decision, error) {
	if req.CoordinatorType != 0 { // 1: transactions
		return proxy.Decision{}, nil
	}
	batched := req.Version >= 4 // KIP-699
	keys := req.CoordinatorKeys
	if !batched {
		keys = []string{req.CoordinatorKey}
	}
	managed, others := g.split(keys)
	if len(managed) == 0 {
		return proxy.Decision{}, nil
	}
	var nodes map[string]int32
	var err error
	if g.opt.Ownership == nil {
		nodes, err = g.opt.Coordinators.CoordinatorsOf(ctx, managed)
		if err != nil {
			g.log.Debug("FindCoordinator: the upstream coordinator of a managed group is unknown", "err", err)
		}
	} else {
		// In a cluster the group's coordinator is the gateway that owns
		// it, a node of its own (proxy.Peer), whatever the upstream's.
		nodes = make(map[string]int32, len(managed))
		var alone []string
		for _, group := range managed {
			switch o := g.opt.Ownership.OwnerOf(group); {
			case o.Node >= 0:
				nodes[group] = o.Node
			case g.opt.Alone && o.State != OwnedElsewhere:
				alone = append(alone, group)
			}
		}
		if len(alone) > 0 {
			local, lerr := g.opt.Coordinators.CoordinatorsOf(ctx, alone)
			maps.Copy(nodes, local)
			err = lerr
		}
		if len(nodes) < len(managed) && err == nil {
			err = errNoOwnerYet
		}
	}
	answer := func(group string) (node int32, code int16, msg *string) {
		if n, ok := nodes[group]; ok {
			return n, 0, nil
		}
		m := "wasmassign: the upstream did not name the group's coordinator"
		if err != nil {
			m = fmt.Sprintf("wasmassign: %v", err)
		}
		return -1, kerr.CoordinatorNotAvailable.Code, &m
	}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if !batched {
		resp.NodeID, resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorKey)
		resp.Port = -1
		return proxy.Decision{Respond: resp}, nil
	}
	for _, group := range managed {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = group
		c.NodeID, c.ErrorCode, c.ErrorMessage = answer(group)
		c.Port = -1
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if len(others) == 0 {
		return proxy.Decision{Respond: resp}, nil
	}
	up := *req
	up.CoordinatorKeys = others
	up.CoordinatorKey = others[0]
	return proxy.Decision{Forward: &up, OnResponse: func(r kmsg.Response) kmsg.Response {
		if u, ok := r.(*kmsg.FindCoordinatorResponse); ok {
			u.Coordinators = append(u.Coordinators, resp.Coordinators...)
		}
		return r
	}}, nil
}

// errNoOwnerYet names why a managed group has no coordinator while the
// cluster's gateways share their groups out.
var errNoOwnerYet = errors.New("no gateway of the cluster owns the group yet")

// deleteGroups lets the coordinator check managed groups (it refuses
// GROUP_NOT_EMPTY and forwards the rest itself); unmanaged groups go
// upstream on this connection, and the answers are merged. In a cluster a
// managed group this gateway does not serve is answered NOT_COORDINATOR
// (or COORDINATOR_LOAD_IN_PROGRESS), as a Kafka broker answers for a group
// it does not coordinate: this gateway's coordinator does not hold it, and
// would delete the offsets of a group that another gateway serves.
func (g *Gateway) deleteGroups(ctx context.Context, r proxy.Request, req *kmsg.DeleteGroupsRequest) (proxy.Decision, error) {
	with := func(groups []string) *kmsg.DeleteGroupsRequest {
		c := *req
		c.Groups = groups
		return &c
	}
	groups, refused := g.servedHere(req.Groups)
	var elsewhere []kmsg.DeleteGroupsResponseGroup
	for _, rf := range refused {
		elsewhere = append(elsewhere, coordinator.ErrorResponse(with([]string{rf.group}), rf.code).(*kmsg.DeleteGroupsResponse).Groups...)
	}
	add := func(resp kmsg.Response) kmsg.Response {
		if d, ok := resp.(*kmsg.DeleteGroupsResponse); ok {
			d.Groups = append(d.Groups, elsewhere...)
		}
		return resp
	}
	merge := func(up, local *kmsg.DeleteGroupsResponse) *kmsg.DeleteGroupsResponse {
		up.Groups = append(up.Groups, local.Groups...)
		return up
	}
	if len(elsewhere) == 0 {
		return splitGroups(g, ctx, r, req.Groups, with, merge)
	}
	if len(groups) == 0 {
		resp := req.ResponseKind()
		resp.SetVersion(min(req.Version, 2))
		return proxy.Decision{Respond: add(resp)}, nil
	}
	d, err := splitGroups(g, ctx, r, groups, with, merge)
	switch {
	case err != nil:
	case d.Respond != nil:
		d.Respond = add(d.Respond)
	case d.OnResponse != nil:
		merged := d.OnResponse
		d.OnResponse = func(up kmsg.Response) kmsg.Response { return add(merged(up)) }
	default: // only unmanaged groups are left: they go upstream
		d.Forward, d.OnResponse = with(groups), add
	}
	return d, err
}

// servedHere splits groups into those this gateway answers for (unmanaged
// ones included) and the managed ones it does not serve now, which another
// gateway of its cluster does, or will once loaded; every group is served
// here outside a cluster.
func (g *Gateway) servedHere(groups []string) (served []string, refused []refusal) {
	if g.opt.Ownership == nil {
		return groups, nil
	}
	for _, id := range groups {
		if !g.opt.Manages(id) {
			served = append(served, id)
		} else if code := g.opt.Ownership.OwnerOf(id).State.Refusal(); code != 0 {
			refused = append(refused, refusal{id, code})
		} else {
			served = append(served, id)
		}
	}
	return served, refused
}

// refusal is a managed group this gateway does not serve, and the error
// code its part of a request is answered with.
type refusal struct {
	group string
	code  int16
}

// describeGroups answers managed groups from the coordinator and the rest
// upstream, one response in the order the client asked. A managed group
// the coordinator does not hold may still exist upstream as offsets alone
// (assign() and commit, as Flink and Spark do, or a group forgotten after
// its empty retention): Kafka describes it as Empty with no protocol type,
// so the upstream's answer stands for it.
func (g *Gateway) describeGroups(ctx context.Context, r proxy.Request, req *kmsg.DescribeGroupsRequest) (proxy.Decision, error) {
	with := func(groups []string) *kmsg.DescribeGroupsRequest {
		c := *req
		c.Groups = groups
		return &c
	}
	managed, others := g.split(req.Groups)
	if len(managed) == 0 {
		return proxy.Decision{}, nil
	}
	// In a cluster a group another gateway owns is described there: Kafka
	// answers NOT_COORDINATOR for each group a broker does not coordinate.
	var elsewhere []kmsg.DescribeGroupsResponseGroup
	managed, refused := g.servedHere(managed)
	for _, rf := range refused {
		elsewhere = append(elsewhere, coordinator.ErrorResponse(with([]string{rf.group}), rf.code).(*kmsg.DescribeGroupsResponse).Groups...)
	}
	local := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	if len(managed) > 0 {
		resp, err := g.opt.Driver.Handle(ctx, client(r), with(managed))
		if err != nil {
			return proxy.Decision{}, fmt.Errorf("DescribeGroups: %w", err)
		}
		var ok bool
		if local, ok = resp.(*kmsg.DescribeGroupsResponse); !ok {
			return proxy.Decision{}, fmt.Errorf("DescribeGroups: the coordinator answered with a %s", kmsg.NameForKey(resp.Key()))
		}
	}
	if len(elsewhere) > 0 {
		local.Groups = append(local.Groups, elsewhere...)
		inRequestOrder(local, req.Groups)
	}
	unheld := make(map[string]bool)
	for _, grp := range local.Groups {
		if grp.ErrorCode == kerr.GroupIDNotFound.Code || (grp.ErrorCode == 0 && grp.State == "Dead") {
			unheld[grp.Group] = true
			others = append(others, grp.Group)
		}
	}
	if len(others) == 0 {
		return proxy.Decision{Respond: local}, nil
	}
	order := req.Groups
	return proxy.Decision{Forward: with(others), OnResponse: func(up kmsg.Response) kmsg.Response {
		u, ok := up.(*kmsg.DescribeGroupsResponse)
		if !ok {
			return up
		}
		byID := make(map[string]kmsg.DescribeGroupsResponseGroup, len(order))
		for _, grp := range local.Groups {
			byID[grp.Group] = grp
		}
		for _, grp := range u.Groups {
			if _, mine := byID[grp.Group]; !mine || unheld[grp.Group] {
				byID[grp.Group] = grp
			}
		}
		u.Groups = u.Groups[:0]
		for _, id := range order {
			if grp, ok := byID[id]; ok {
				u.Groups = append(u.Groups, grp)
				delete(byID, id)
			}
		}
		return u
	}}, nil
}

// inRequestOrder sorts resp's groups in the order the client named them.
func inRequestOrder(resp *kmsg.DescribeGroupsResponse, order []string) {
	slices.SortStableFunc(resp.Groups, func(a, b kmsg.DescribeGroupsResponseGroup) int {
		return slices.Index(order, a.Group) - slices.Index(order, b.Group)
	})
}

// splitGroups serves a request that names several groups: the coordinator
// answers the managed ones (with(managed)), the rest goes upstream on this
// connection (with(others)), and merge combines the two answers. A request
// naming no managed group passes through untouched, and one naming only
// managed groups never goes upstream.
func splitGroups[Req kmsg.Request, Resp kmsg.Response](g *Gateway, ctx context.Context, r proxy.Request, groups []string,
	with func([]string) Req, merge func(up, local Resp) Resp) (proxy.Decision, error) {
	managed, others := g.split(groups)
	if len(managed) == 0 {
		return proxy.Decision{}, nil
	}
	resp, err := g.opt.Driver.Handle(ctx, client(r), with(managed))
	if err != nil {
		return proxy.Decision{}, fmt.Errorf("%s: %w", kmsg.NameForKey(r.Req.Key()), err)
	}
	local, ok := resp.(Resp)
	if !ok {
		return proxy.Decision{}, fmt.Errorf("%s: the coordinator answered with a %s", kmsg.NameForKey(r.Req.Key()), kmsg.NameForKey(resp.Key()))
	}
	if len(others) == 0 {
		return proxy.Decision{Respond: local}, nil
	}
	return proxy.Decision{Forward: with(others), OnResponse: func(up kmsg.Response) kmsg.Response {
		u, ok := up.(Resp)
		if !ok {
			return up
		}
		return merge(u, local)
	}}, nil
}

// listGroups merges the upstream's list from this connection's broker with
// the managed groups that broker coordinates upstream, so that asking every
// broker lists each managed group once. A managed group the upstream itself
// lists is shown once, as the coordinator sees it, or as the upstream does
// when the coordinator does not hold it. The upstream lists every
// managed group that has committed offsets, as a group without members:
// the gateway forwards commits with generation -1. Only a managed group
// the upstream lists with members (or in a state other than Empty) means
// split brain, clients bypassing the gateway, and is logged as an error.
func (g *Gateway) listGroups(ctx context.Context, r proxy.Request, req *kmsg.ListGroupsRequest) (proxy.Decision, error) {
	if g.opt.Ownership != nil && !g.opt.Alone {
		return g.clusterListGroups(ctx, r, req)
	}
	resp, err := g.opt.Driver.Handle(ctx, client(r), req)
	if err != nil {
		return proxy.Decision{}, fmt.Errorf("ListGroups: %w", err)
	}
	var managed []kmsg.ListGroupsResponseGroup
	var ids []string
	for _, grp := range resp.(*kmsg.ListGroupsResponse).Groups {
		if g.opt.Manages(grp.Group) {
			managed = append(managed, grp)
			ids = append(ids, grp.Group)
		}
	}
	var mine []kmsg.ListGroupsResponseGroup
	if len(ids) > 0 {
		nodes, err := g.opt.Coordinators.CoordinatorsOf(ctx, ids)
		if err != nil {
			g.log.Warn("ListGroups: cannot find the upstream coordinator of some groups; they are left out", "err", err)
		}
		for _, grp := range managed {
			// A bootstrap connection answers like the broker it reaches.
			if node, ok := nodes[grp.Group]; ok && node == r.Conn.Upstream {
				mine = append(mine, grp)
			}
		}
	}
	held := make(map[string]bool, len(ids))
	for _, id := range ids {
		held[id] = true
	}
	return proxy.Decision{OnResponse: func(up kmsg.Response) kmsg.Response {
		u := up.(*kmsg.ListGroupsResponse)
		kept := u.Groups[:0]
		for _, grp := range u.Groups {
			if g.opt.Manages(grp.Group) {
				g.checkUpstreamListing(grp)
				if held[grp.Group] {
					continue // listed as the coordinator sees it
				}
				// Offsets alone (assign() and commit, or a group the
				// coordinator forgot after its empty retention): Kafka
				// lists it, and lag exporters look for it.
			}
			kept = append(kept, grp)
		}
		u.Groups = append(kept, mine...)
		sortListed(u)
		return u
	}}, nil
}

// clusterListGroups lists each managed group once in a cluster, at the
// gateway that owns it. A gateway's own node (its bootstrap listener,
// which Metadata names as the gateway's node) lists the managed groups it
// serves, as its coordinator holds them, and those of its shards that the
// upstream lists with offsets alone; a listener for an upstream broker
// lists that broker's groups without the managed ones.
func (g *Gateway) clusterListGroups(ctx context.Context, r proxy.Request, req *kmsg.ListGroupsRequest) (proxy.Decision, error) {
	if r.Conn.Node != proxy.NodeBootstrap {
		return proxy.Decision{OnResponse: func(up kmsg.Response) kmsg.Response {
			u, ok := up.(*kmsg.ListGroupsResponse)
			if !ok {
				return up
			}
			u.Groups = slices.DeleteFunc(u.Groups, func(grp kmsg.ListGroupsResponseGroup) bool {
				if !g.opt.Manages(grp.Group) {
					return false
				}
				g.checkUpstreamListing(grp)
				return true
			})
			return u
		}}, nil
	}
	resp, err := g.opt.Driver.Handle(ctx, client(r), req)
	if err != nil {
		return proxy.Decision{}, fmt.Errorf("ListGroups: %w", err)
	}
	local, ok := resp.(*kmsg.ListGroupsResponse)
	if !ok || local.ErrorCode != 0 {
		return proxy.Decision{Respond: resp}, nil
	}
	held := make(map[string]bool, len(local.Groups))
	local.Groups = slices.DeleteFunc(local.Groups, func(grp kmsg.ListGroupsResponseGroup) bool {
		held[grp.Group] = true
		return g.opt.Manages(grp.Group) && g.opt.Ownership.OwnerOf(grp.Group).State != OwnedHere
	})
	// Offsets alone: lag exporters look for such groups too. The upstream
	// client asks every broker and merges the answers.
	up, err := g.opt.Upstream.Forward(ctx, req)
	if err != nil {
		g.log.Warn("ListGroups: the upstream's groups could not be listed; managed groups with offsets alone are left out", "err", err)
	} else if u, ok := up.(*kmsg.ListGroupsResponse); ok {
		for _, grp := range u.Groups {
			if !g.opt.Manages(grp.Group) || held[grp.Group] {
				continue
			}
			g.checkUpstreamListing(grp)
			if g.opt.Ownership.OwnerOf(grp.Group).State == OwnedHere {
				local.Groups = append(local.Groups, grp)
			}
		}
	}
	sortListed(local)
	return proxy.Decision{Respond: local}, nil
}

// checkUpstreamListing logs a managed group that the upstream lists with
// members: clients bypass the gateway, or a gateway of another cluster
// serves it (split brain).
func (g *Gateway) checkUpstreamListing(grp kmsg.ListGroupsResponseGroup) {
	if upstreamHasMembers(grp) {
		g.log.Error("managed group is also listed upstream: clients may be bypassing the gateway, or a second gateway runs", "group", grp.Group, "upstream_state", grp.GroupState)
	}
}

// sortListed orders a ListGroups answer by group id.
func sortListed(r *kmsg.ListGroupsResponse) {
	slices.SortFunc(r.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
}

// upstreamHasMembers reports whether the upstream's listing of a group may
// have members. A group only ever committed to with generation -1 has no
// protocol type; from ListGroups v4 an Empty state says no members either.
// Before v4 the state is unknown, so a group that had members once counts.
func upstreamHasMembers(grp kmsg.ListGroupsResponseGroup) bool {
	return grp.ProtocolType != "" && !strings.EqualFold(grp.GroupState, "Empty")
}

// offsetFetch forwards, and turns an upstream GROUP_ID_NOT_FOUND for a
// managed group into "no offsets" (-1): the upstream has simply never seen a
// commit for a group whose members it never sees. Each group of a batch
// (v8+) is treated by its own rule; unmanaged groups' answers pass as they
// came.
//
// A managed group whose upstream coordinator has moved answers
// NOT_COORDINATOR. The client then looks the coordinator up again, which
// the gateway answers (findCoordinator) from what it remembers: that is
// forgotten here, or the client would be sent back to the old broker until
// the memory expired.
//
// In a cluster the client asks the gateway that owns the group, on a
// connection to no upstream broker in particular: the request goes to the
// group's upstream coordinator through Options.Upstream, and a gateway
// that does not own a group it names alone answers as notHere does.
func (g *Gateway) offsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (proxy.Decision, error) {
	var groups []string
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			groups = append(groups, rg.Group)
		}
	} else {
		groups = []string{req.Group}
	}
	managed, _ := g.split(groups)
	if len(managed) == 0 {
		return proxy.Decision{}, nil
	}
	fix := func(up kmsg.Response) kmsg.Response {
		u, ok := up.(*kmsg.OffsetFetchResponse)
		if !ok {
			return up
		}
		notFound := kerr.GroupIDNotFound.Code
		if req.Version < 8 {
			if upstream.CoordinatorMoved(u.ErrorCode) || slices.ContainsFunc(u.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
				// v0 and v1 report errors per partition only.
				return slices.ContainsFunc(t.Partitions, func(p kmsg.OffsetFetchResponseTopicPartition) bool { return upstream.CoordinatorMoved(p.ErrorCode) })
			}) {
				g.opt.Coordinators.Forget(req.Group)
			}
			if u.ErrorCode == notFound {
				u.ErrorCode = 0
				u.Topics = unknownOffsets(req.Topics)
			}
			return u
		}
		for i := range u.Groups {
			rg := &u.Groups[i]
			if upstream.CoordinatorMoved(rg.ErrorCode) && g.opt.Manages(rg.Group) {
				g.opt.Coordinators.Forget(rg.Group)
			}
			if rg.ErrorCode == notFound && g.opt.Manages(rg.Group) {
				rg.ErrorCode = 0
				for _, q := range req.Groups {
					if q.Group == rg.Group {
						rg.Topics = unknownGroupOffsets(q.Topics)
					}
				}
			}
		}
		return u
	}
	if g.opt.Ownership == nil {
		return proxy.Decision{OnResponse: fix}, nil
	}
	if len(groups) == 1 {
		if refused := g.notHere(req, groups[0]); refused != nil {
			return proxy.Decision{Respond: refused}, nil
		}
	}
	if req.Version >= 7 {
		// A cluster commits a managed group's offsets in transactions,
		// visible a moment after the commit is answered: the client
		// waits for them (UNSTABLE_OFFSET_COMMIT, KIP-447) rather than
		// reading the offsets before them.
		req.RequireStable = true
	}
	resp, err := g.opt.Upstream.Forward(ctx, req)
	if err != nil {
		return proxy.Decision{}, fmt.Errorf("OffsetFetch of %v: %w", groups, err)
	}
	return proxy.Decision{Respond: fix(resp)}, nil
}

func unknownOffsets(topics []kmsg.OffsetFetchRequestTopic) []kmsg.OffsetFetchResponseTopic {
	out := make([]kmsg.OffsetFetchResponseTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

func unknownGroupOffsets(topics []kmsg.OffsetFetchRequestGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

// split separates managed group ids from the others, keeping order.
func (g *Gateway) split(groups []string) (managed, others []string) {
	for _, id := range groups {
		if g.opt.Manages(id) {
			managed = append(managed, id)
		} else {
			others = append(others, id)
		}
	}
	return managed, others
}

// FetchRack hands the driver a rack a client at c sent in a Fetch request
// (KIP-392 RackID), naming the client as the coordinator does, with the
// partitions the Fetch read, which tell the member that sent it. The proxy
// calls it (proxy.Options.OnFetchRack).
func (g *Gateway) FetchRack(c proxy.ConnInfo, clientID, rack string, topics []kmsg.FetchRequestTopic) {
	if rack == "" {
		return
	}
	fetched := make([]coordinator.FetchedTopic, len(topics))
	for i, t := range topics {
		fetched[i] = coordinator.FetchedTopic{Topic: t.Topic, TopicID: t.TopicID, Partitions: make([]int32, len(t.Partitions))}
		for j, p := range t.Partitions {
			fetched[i].Partitions[j] = p.Partition
		}
	}
	g.opt.Driver.RecordFetchRack(coordinator.FetchRack{ClientID: clientID, Host: clientHost(c), Rack: rack, Fetched: fetched})
}

// clientHost is the connection's client host in Kafka's form, made by the
// proxy once per connection (or here, for a ConnInfo built elsewhere).
func clientHost(c proxy.ConnInfo) string {
	if c.ClientHost != "" {
		return c.ClientHost
	}
	return proxy.KafkaHost(c.Remote)
}
