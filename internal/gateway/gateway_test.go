package gateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/proxy"
)

// fakeDriver answers like a coordinator that holds the managed groups
// "m1", "m2" and "m3", and records what it was asked.
type fakeDriver struct {
	asked   []kmsg.Request
	clients []coordinator.Client
	racks   []coordinator.FetchRack
}

func (f *fakeDriver) RecordFetchRack(seen coordinator.FetchRack) {
	f.racks = append(f.racks, seen)
}

func (f *fakeDriver) Handle(_ context.Context, c coordinator.Client, req kmsg.Request) (kmsg.Response, error) {
	f.asked = append(f.asked, req)
	f.clients = append(f.clients, c)
	switch r := req.(type) {
	case *kmsg.DescribeGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, id := range r.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.State = id, "Stable"
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	case *kmsg.ListGroupsRequest:
		resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
		for _, id := range []string{"m1", "m2", "m3"} {
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.GroupState = id, "Stable"
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	case *kmsg.DeleteGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, id := range r.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.NonEmptyGroup.Code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	return req.ResponseKind(), nil
}

// fakeUpstream puts m1 on node 1 and the other groups on node 2, and
// records the groups the gateway tells it to forget.
type fakeUpstream struct {
	mu        sync.Mutex
	forgotten []string
}

func (f *fakeUpstream) Forget(group string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, group)
}

// takeForgotten returns the groups forgotten since the last call.
func (f *fakeUpstream) takeForgotten() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.forgotten
	f.forgotten = nil
	return out
}

func (*fakeUpstream) CoordinatorsOf(_ context.Context, groups []string) (map[string]int32, error) {
	nodes := make(map[string]int32, len(groups))
	for _, g := range groups {
		nodes[g] = 2
		if g == "m1" {
			nodes[g] = 1
		}
	}
	return nodes, nil
}

func newGateway(logs *bytes.Buffer) (*Gateway, *fakeDriver) {
	fc := &fakeDriver{}
	g := New(Options{
		Manages:      func(id string) bool { return strings.HasPrefix(id, "m") },
		Driver:       fc,
		Coordinators: &fakeUpstream{},
		Logger:       slog.New(slog.NewTextHandler(logs, nil)),
	})
	return g, fc
}

func request(node int32, req kmsg.Request) proxy.Request {
	id := "app-1"
	upstream := node
	if node == proxy.NodeBootstrap {
		upstream = 2 // the broker the bootstrap connection reaches
	}
	return proxy.Request{Conn: proxy.ConnInfo{Node: node, Upstream: upstream, Remote: netip.MustParseAddrPort("[::ffff:10.0.0.7]:5555")}, ClientID: &id, Req: req}
}

func TestIntercept_MembershipOfManagedGroupsIsAnsweredLocally(t *testing.T) {
	g, fc := newGateway(&bytes.Buffer{})
	for _, tt := range []struct {
		req   kmsg.Request
		local bool
	}{
		{&kmsg.JoinGroupRequest{Group: "m1"}, true},
		{&kmsg.SyncGroupRequest{Group: "m1"}, true},
		{&kmsg.HeartbeatRequest{Group: "m1"}, true},
		{&kmsg.LeaveGroupRequest{Group: "m1"}, true},
		{&kmsg.OffsetCommitRequest{Group: "m1"}, true},
		{&kmsg.TxnOffsetCommitRequest{Group: "m1"}, true},
		{&kmsg.OffsetDeleteRequest{Group: "m1"}, true},
		{&kmsg.JoinGroupRequest{Group: "other"}, false},
		{&kmsg.OffsetCommitRequest{Group: "other"}, false},
	} {
		if !g.Intercepts(int16(tt.req.Key())) {
			t.Errorf("%s is not intercepted", kmsg.NameForKey(tt.req.Key()))
		}
		d, err := g.Intercept(context.Background(), request(1, tt.req))
		if err != nil {
			t.Fatal(err)
		}
		if (d.Respond != nil) != tt.local || d.Forward != nil {
			t.Errorf("%s: decision %+v, local %v", kmsg.NameForKey(tt.req.Key()), d, tt.local)
		}
	}
	if c := fc.clients[0]; c.ID != "app-1" || c.Host != "/10.0.0.7" {
		t.Errorf("client %+v, want id app-1 and host /10.0.0.7", c)
	}
	if g.Intercepts(int16(kmsg.Produce)) || g.Intercepts(int16(kmsg.Fetch)) {
		t.Error("data-path requests must not be decoded")
	}
}

func TestIntercept_DescribeGroupsMergesInTheClientsOrder(t *testing.T) {
	g, fc := newGateway(&bytes.Buffer{})
	req := &kmsg.DescribeGroupsRequest{Groups: []string{"u1", "m1", "u2", "m2"}}
	d, err := g.Intercept(context.Background(), request(1, req))
	if err != nil {
		t.Fatal(err)
	}
	fwd, ok := d.Forward.(*kmsg.DescribeGroupsRequest)
	if !ok || !slices.Equal(fwd.Groups, []string{"u1", "u2"}) {
		t.Fatalf("forward %+v, want only the unmanaged groups", d.Forward)
	}
	if asked := fc.asked[0].(*kmsg.DescribeGroupsRequest).Groups; !slices.Equal(asked, []string{"m1", "m2"}) {
		t.Errorf("coordinator asked for %v", asked)
	}
	up := &kmsg.DescribeGroupsResponse{Groups: []kmsg.DescribeGroupsResponseGroup{{Group: "u2", State: "Empty"}, {Group: "u1", State: "Empty"}}}
	merged := d.OnResponse(up).(*kmsg.DescribeGroupsResponse)
	var order []string
	for _, grp := range merged.Groups {
		order = append(order, grp.Group)
	}
	if !slices.Equal(order, req.Groups) {
		t.Errorf("merged order %v, want %v", order, req.Groups)
	}
	// Only managed groups: answered without going upstream.
	d, _ = g.Intercept(context.Background(), request(1, &kmsg.DescribeGroupsRequest{Groups: []string{"m3"}}))
	if d.Respond == nil || d.Forward != nil {
		t.Errorf("all-managed describe: %+v", d)
	}
	// No managed group: untouched.
	d, _ = g.Intercept(context.Background(), request(1, &kmsg.DescribeGroupsRequest{Groups: []string{"u1"}}))
	if d.Respond != nil || d.Forward != nil || d.OnResponse != nil {
		t.Errorf("unmanaged describe: %+v", d)
	}
}

func TestIntercept_ListGroupsListsEachManagedGroupOnItsUpstreamCoordinator(t *testing.T) {
	var logs bytes.Buffer
	g, _ := newGateway(&logs)
	listed := func(node int32, upstream ...string) []string {
		d, err := g.Intercept(context.Background(), request(node, &kmsg.ListGroupsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		up := &kmsg.ListGroupsResponse{}
		for _, id := range upstream {
			// Listed as a group with members, as clients bypassing the
			// gateway would make it.
			up.Groups = append(up.Groups, kmsg.ListGroupsResponseGroup{Group: id, ProtocolType: "consumer", GroupState: "Stable"})
		}
		var out []string
		for _, grp := range d.OnResponse(up).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, grp.Group)
		}
		return out
	}
	if got := listed(1, "u1"); !slices.Equal(got, []string{"m1", "u1"}) {
		t.Errorf("node 1 lists %v, want m1 and u1", got)
	}
	if got := listed(2, "u2", "m3"); !slices.Equal(got, []string{"m2", "m3", "u2"}) {
		t.Errorf("node 2 lists %v, want m2, m3 (once) and u2", got)
	}
	if !strings.Contains(logs.String(), "m3") || !strings.Contains(logs.String(), "ERROR") {
		t.Errorf("a managed group listed upstream was not logged as an error: %s", logs.String())
	}
	// Across all brokers, every managed group appears exactly once.
	all := append(listed(1), listed(2)...)
	for _, id := range []string{"m1", "m2", "m3"} {
		if n := countOf(all, id); n != 1 {
			t.Errorf("%s listed %d times across brokers", id, n)
		}
	}
	if got := listed(proxy.NodeBootstrap, "u9"); !slices.Equal(got, []string{"m2", "m3", "u9"}) {
		t.Errorf("a bootstrap connection reaching node 2 lists %v, want what node 2 lists", got)
	}
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func TestIntercept_OffsetFetchOfAManagedGroupUnknownUpstreamIsNoOffsets(t *testing.T) {
	g, _ := newGateway(&bytes.Buffer{})
	notFound := kerr.GroupIDNotFound.Code

	old := &kmsg.OffsetFetchRequest{Version: 7, Group: "m1", Topics: []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}}
	d, _ := g.Intercept(context.Background(), request(1, old))
	resp := d.OnResponse(&kmsg.OffsetFetchResponse{Version: 7, ErrorCode: notFound}).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 || resp.Topics[0].Partitions[1].Offset != -1 {
		t.Errorf("v7 response %+v", resp)
	}

	batched := &kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{
		{Group: "m1", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{3}}}},
		{Group: "u1"},
	}}
	d, _ = g.Intercept(context.Background(), request(1, batched))
	resp = d.OnResponse(&kmsg.OffsetFetchResponse{Version: 8, Groups: []kmsg.OffsetFetchResponseGroup{
		{Group: "m1", ErrorCode: notFound}, {Group: "u1", ErrorCode: notFound},
	}}).(*kmsg.OffsetFetchResponse)
	if m := resp.Groups[0]; m.ErrorCode != 0 || m.Topics[0].Partitions[0].Offset != -1 || m.Topics[0].Partitions[0].Partition != 3 {
		t.Errorf("managed group %+v", m)
	}
	if u := resp.Groups[1]; u.ErrorCode != notFound {
		t.Errorf("unmanaged group's error was changed: %+v", u)
	}
	d, _ = g.Intercept(context.Background(), request(1, &kmsg.OffsetFetchRequest{Version: 7, Group: "u1"}))
	if d.OnResponse != nil {
		t.Error("an unmanaged group's OffsetFetch was touched")
	}
}

// A managed group's OffsetFetch answered NOT_COORDINATOR (or
// COORDINATOR_NOT_AVAILABLE) by the broker the client asked makes the
// gateway forget where the group's coordinator is, so that the client's
// next FindCoordinator is looked up afresh; other answers and unmanaged
// groups leave the memory alone.
func TestIntercept_OffsetFetchFindingTheCoordinatorMovedForgetsIt(t *testing.T) {
	g, _ := newGateway(&bytes.Buffer{})
	up := g.opt.Coordinators.(*fakeUpstream)
	moved, unavailable := kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code
	tests := []struct {
		name string
		req  *kmsg.OffsetFetchRequest
		resp *kmsg.OffsetFetchResponse
		want []string
	}{
		{"v7 moved", &kmsg.OffsetFetchRequest{Version: 7, Group: "m1"}, &kmsg.OffsetFetchResponse{Version: 7, ErrorCode: moved}, []string{"m1"}},
		{"v7 unavailable", &kmsg.OffsetFetchRequest{Version: 7, Group: "m1"}, &kmsg.OffsetFetchResponse{Version: 7, ErrorCode: unavailable}, []string{"m1"}},
		{"v1 per partition", &kmsg.OffsetFetchRequest{Version: 1, Group: "m2"}, &kmsg.OffsetFetchResponse{Version: 1, Topics: []kmsg.OffsetFetchResponseTopic{
			{Topic: "t", Partitions: []kmsg.OffsetFetchResponseTopicPartition{{Partition: 0}, {Partition: 1, ErrorCode: moved}}}}}, []string{"m2"}},
		{"v7 answered", &kmsg.OffsetFetchRequest{Version: 7, Group: "m1"}, &kmsg.OffsetFetchResponse{Version: 7}, nil},
		{"v8 batch", &kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{{Group: "m1"}, {Group: "u1"}, {Group: "m2"}, {Group: "m3"}}},
			&kmsg.OffsetFetchResponse{Version: 8, Groups: []kmsg.OffsetFetchResponseGroup{
				{Group: "m1", ErrorCode: moved}, {Group: "u1", ErrorCode: moved}, {Group: "m2"}, {Group: "m3", ErrorCode: unavailable}}},
			[]string{"m1", "m3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := g.Intercept(context.Background(), request(1, tt.req))
			if err != nil || d.OnResponse == nil {
				t.Fatalf("decision %+v, %v: the managed group's answer is not looked at", d, err)
			}
			d.OnResponse(tt.resp)
			if got := up.takeForgotten(); !slices.Equal(got, tt.want) {
				t.Errorf("forgot %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIntercept_DeleteGroupsChecksManagedGroupsFirst(t *testing.T) {
	g, _ := newGateway(&bytes.Buffer{})
	d, err := g.Intercept(context.Background(), request(1, &kmsg.DeleteGroupsRequest{Groups: []string{"m1", "u1"}}))
	if err != nil {
		t.Fatal(err)
	}
	if fwd := d.Forward.(*kmsg.DeleteGroupsRequest); !slices.Equal(fwd.Groups, []string{"u1"}) {
		t.Errorf("forwarded %v", fwd.Groups)
	}
	merged := d.OnResponse(&kmsg.DeleteGroupsResponse{Groups: []kmsg.DeleteGroupsResponseGroup{{Group: "u1"}}}).(*kmsg.DeleteGroupsResponse)
	codes := map[string]int16{}
	for _, grp := range merged.Groups {
		codes[grp.Group] = grp.ErrorCode
	}
	if codes["m1"] != kerr.NonEmptyGroup.Code || codes["u1"] != 0 || len(codes) != 2 {
		t.Errorf("merged %v", codes)
	}
}

// TestFetchRack_NamesTheClientAsTheCoordinatorDoes: a Fetch rack reaches the
// driver under the client id and the Kafka form of the host, IPv4-mapped
// addresses unmapped, as JoinGroup names the same client.
func TestFetchRack_NamesTheClientAsTheCoordinatorDoes(t *testing.T) {
	d := &fakeDriver{}
	g := New(Options{Manages: func(string) bool { return true }, Driver: d, Coordinators: &fakeUpstream{}})
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = "t"
	for _, p := range []int32{2, 0} {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p
		topic.Partitions = append(topic.Partitions, fp)
	}
	g.FetchRack(proxy.ConnInfo{Remote: netip.MustParseAddrPort("10.1.2.3:4000")}, "app", "az-b", []kmsg.FetchRequestTopic{topic})
	g.FetchRack(proxy.ConnInfo{Remote: netip.MustParseAddrPort("[::ffff:10.1.2.4]:4000")}, "app", "az-c", nil)
	g.FetchRack(proxy.ConnInfo{Remote: netip.MustParseAddrPort("10.1.2.5:4000")}, "app", "", []kmsg.FetchRequestTopic{topic})
	want := []coordinator.FetchRack{
		{ClientID: "app", Host: "/10.1.2.3", Rack: "az-b", Fetched: []coordinator.FetchedTopic{{Topic: "t", Partitions: []int32{2, 0}}}},
		{ClientID: "app", Host: "/10.1.2.4", Rack: "az-c", Fetched: []coordinator.FetchedTopic{}},
	}
	if !reflect.DeepEqual(d.racks, want) {
		t.Errorf("driver got %+v, want %+v (no sighting without a rack)", d.racks, want)
	}
	g.Intercept(context.Background(), proxy.Request{Conn: proxy.ConnInfo{Remote: netip.MustParseAddrPort("10.1.2.3:4000")}, ClientID: kmsg.StringPtr("app"), Req: kmsg.NewPtrHeartbeatRequest()})
	if len(d.clients) != 1 || d.clients[0].Host != want[0].Host || d.clients[0].ID != want[0].ClientID {
		t.Errorf("a request from the same client reached the driver as %+v", d.clients)
	}
}

// lossyUpstream is fakeUpstream, except that it cannot find the
// coordinator of a group whose id contains "lost".
type lossyUpstream struct{}

func (lossyUpstream) Forget(string) {}

func (lossyUpstream) CoordinatorsOf(ctx context.Context, groups []string) (map[string]int32, error) {
	var found []string
	var lost error
	for _, g := range groups {
		if strings.Contains(g, "lost") {
			lost = fmt.Errorf("FindCoordinator %s: connection refused", g)
			continue
		}
		found = append(found, g)
	}
	nodes, _ := (&fakeUpstream{}).CoordinatorsOf(ctx, found)
	return nodes, lost
}

// TestIntercept_FindCoordinatorOfManagedGroupsIsAnsweredLocally checks the
// local answer to FindCoordinator: managed groups get the node the upstream
// names (the one ListGroups lists them on), unmanaged groups and
// transaction coordinators are looked up upstream, a batch naming both is
// split and merged, and a managed group whose coordinator is unknown gets
// the retriable COORDINATOR_NOT_AVAILABLE.
func TestIntercept_FindCoordinatorOfManagedGroupsIsAnsweredLocally(t *testing.T) {
	g := New(Options{
		Manages:      func(id string) bool { return strings.HasPrefix(id, "m") },
		Driver:       &fakeDriver{},
		Coordinators: lossyUpstream{},
	})
	if !g.Intercepts(int16(kmsg.FindCoordinator)) {
		t.Fatal("FindCoordinator is not intercepted")
	}
	single := func(version int16, key string, typ int8) *kmsg.FindCoordinatorRequest {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.Version, r.CoordinatorKey, r.CoordinatorType = version, key, typ
		return r
	}
	batch := func(keys ...string) *kmsg.FindCoordinatorRequest {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.Version, r.CoordinatorKeys = 4, keys
		return r
	}
	type entry struct {
		node int32
		code int16
	}
	for _, tt := range []struct {
		name      string
		req       *kmsg.FindCoordinatorRequest
		local     map[string]entry // the answers made here, by key
		forwarded []string         // keys sent upstream; nil: the request as it came
		passes    bool             // forwarded untouched
	}{
		{name: "v3 managed", req: single(3, "m1", 0), local: map[string]entry{"m1": {1, 0}}},
		{name: "v0 managed", req: single(0, "m2", 0), local: map[string]entry{"m2": {2, 0}}},
		{name: "v3 unmanaged", req: single(3, "other", 0), passes: true},
		{name: "v3 transactional id", req: single(3, "m1", 1), passes: true},
		{name: "v3 managed, coordinator unknown", req: single(3, "m-lost", 0), local: map[string]entry{"m-lost": {-1, kerr.CoordinatorNotAvailable.Code}}},
		{name: "v4 all managed", req: batch("m1", "m2", "m-lost"), local: map[string]entry{"m1": {1, 0}, "m2": {2, 0}, "m-lost": {-1, kerr.CoordinatorNotAvailable.Code}}},
		{name: "v4 none managed", req: batch("a", "b"), passes: true},
		{name: "v4 mixed", req: batch("a", "m1", "b"), local: map[string]entry{"m1": {1, 0}}, forwarded: []string{"a", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := g.Intercept(context.Background(), request(1, tt.req))
			if err != nil {
				t.Fatal(err)
			}
			if tt.passes {
				if d.Respond != nil || d.Forward != nil || d.OnResponse != nil {
					t.Fatalf("decision %+v; want the request forwarded untouched", d)
				}
				return
			}
			var resp *kmsg.FindCoordinatorResponse
			switch {
			case tt.forwarded == nil:
				if d.Forward != nil || d.Respond == nil {
					t.Fatalf("decision %+v; want a local answer", d)
				}
				resp = d.Respond.(*kmsg.FindCoordinatorResponse)
			default:
				fwd, ok := d.Forward.(*kmsg.FindCoordinatorRequest)
				if !ok || d.OnResponse == nil || !slices.Equal(fwd.CoordinatorKeys, tt.forwarded) {
					t.Fatalf("decision %+v; want keys %v forwarded and the answers merged", d, tt.forwarded)
				}
				up := fwd.ResponseKind().(*kmsg.FindCoordinatorResponse)
				for _, k := range fwd.CoordinatorKeys {
					c := kmsg.NewFindCoordinatorResponseCoordinator()
					c.Key, c.NodeID = k, 7
					up.Coordinators = append(up.Coordinators, c)
				}
				resp = d.OnResponse(up).(*kmsg.FindCoordinatorResponse)
				for _, k := range tt.forwarded {
					if !slices.ContainsFunc(resp.Coordinators, func(c kmsg.FindCoordinatorResponseCoordinator) bool { return c.Key == k && c.NodeID == 7 }) {
						t.Errorf("the upstream's answer for %s is missing from %+v", k, resp.Coordinators)
					}
				}
			}
			got := map[string]entry{}
			if tt.req.Version < 4 {
				got[tt.req.CoordinatorKey] = entry{resp.NodeID, resp.ErrorCode}
				if resp.ErrorCode != 0 && (resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "connection refused")) {
					t.Errorf("error answer's message %v does not say why", resp.ErrorMessage)
				}
			} else {
				for _, c := range resp.Coordinators {
					if !slices.Contains(tt.forwarded, c.Key) {
						got[c.Key] = entry{c.NodeID, c.ErrorCode}
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.local) {
				t.Errorf("local answers %v, want %v", got, tt.local)
			}
		})
	}
}

// fixedOwners owns m1 and m7 here, is loading m2, and leaves the rest to
// the gateway of node 1<<30+7, but m4, which no gateway owns yet.
type fixedOwners struct{}

func (fixedOwners) OwnerOf(group string) Owner {
	switch group {
	case "m1", "m7":
		return Owner{State: OwnedHere, Node: 1<<30 + 1, Host: "gw-a", Port: 9092}
	case "m2":
		return Owner{State: OwnedLoading, Node: 1<<30 + 1, Host: "gw-a", Port: 9092}
	case "m4":
		return Owner{State: OwnedElsewhere, Node: -1}
	}
	return Owner{State: OwnedElsewhere, Node: 1<<30 + 7, Host: "gw-b", Port: 9092}
}

// TestIntercept_InAClusterOnlyTheOwnerAnswersAGroup: the owner answers a
// managed group's requests from its coordinator; the other gateways answer
// NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while they take it over,
// without asking theirs; and FindCoordinator names the owner's node.
func TestIntercept_InAClusterOnlyTheOwnerAnswersAGroup(t *testing.T) {
	fc := &fakeDriver{}
	g := New(Options{
		Manages: func(id string) bool { return strings.HasPrefix(id, "m") }, Driver: fc,
		Coordinators: &fakeUpstream{}, Ownership: fixedOwners{},
	})
	codeOf := func(resp kmsg.Response) int16 {
		switch r := resp.(type) {
		case *kmsg.HeartbeatResponse:
			return r.ErrorCode
		case *kmsg.JoinGroupResponse:
			return r.ErrorCode
		case *kmsg.OffsetCommitResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		}
		t.Fatalf("unexpected %T", resp)
		return 0
	}
	commit := func(group string) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group = group
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}}}}
		return r
	}
	for _, tt := range []struct {
		req   kmsg.Request
		asked bool  // the coordinator answers
		code  int16 // otherwise
	}{
		{&kmsg.HeartbeatRequest{Group: "m1"}, true, 0},
		{commit("m1"), true, 0},
		{&kmsg.HeartbeatRequest{Group: "m2"}, false, kerr.CoordinatorLoadInProgress.Code},
		{&kmsg.JoinGroupRequest{Group: "m3"}, false, kerr.NotCoordinator.Code},
		{commit("m3"), false, kerr.NotCoordinator.Code},
		{&kmsg.HeartbeatRequest{Group: "m4"}, false, kerr.NotCoordinator.Code},
	} {
		before := len(fc.asked)
		d, err := g.Intercept(context.Background(), request(1, tt.req))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s of %s", kmsg.NameForKey(tt.req.Key()), coordinator.GroupsOf(tt.req))
		if asked := len(fc.asked) > before; asked != tt.asked {
			t.Errorf("%s: the coordinator asked %v, want %v", name, asked, tt.asked)
		}
		if d.Respond == nil || d.Forward != nil {
			t.Fatalf("%s: decision %+v, want an answer here", name, d)
		}
		if !tt.asked {
			if got := codeOf(d.Respond); got != tt.code {
				t.Errorf("%s: %v, want %v", name, kerr.ErrorForCode(got), kerr.ErrorForCode(tt.code))
			}
		}
	}

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version = 5
	describe.Groups = []string{"m3", "m1", "m2"}
	d, err := g.Intercept(context.Background(), request(1, describe))
	if err != nil {
		t.Fatal(err)
	}
	var described []string
	for _, grp := range d.Respond.(*kmsg.DescribeGroupsResponse).Groups {
		described = append(described, fmt.Sprintf("%s:%v:%s", grp.Group, kerr.ErrorForCode(grp.ErrorCode), grp.State))
	}
	if want := []string{"m3:" + kerr.NotCoordinator.Error() + ":", "m1:<nil>:Stable", "m2:" + kerr.CoordinatorLoadInProgress.Error() + ":"}; !slices.Equal(described, want) {
		t.Errorf("DescribeGroups in a cluster:\n got %q\nwant %q", described, want)
	}

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version = 4
	find.CoordinatorKeys = []string{"m1", "m2", "m3", "m4"}
	if d, err = g.Intercept(context.Background(), request(1, find)); err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"m1": 1<<30 + 1, "m2": 1<<30 + 1, "m3": 1<<30 + 7, "m4": -1}
	for _, c := range d.Respond.(*kmsg.FindCoordinatorResponse).Coordinators {
		if c.NodeID != want[c.Key] {
			t.Errorf("FindCoordinator of %s: node %d, want %d", c.Key, c.NodeID, want[c.Key])
		}
		if (c.ErrorCode != 0) != (want[c.Key] < 0) {
			t.Errorf("FindCoordinator of %s: %v", c.Key, kerr.ErrorForCode(c.ErrorCode))
		}
		delete(want, c.Key)
	}
	if len(want) > 0 {
		t.Errorf("FindCoordinator did not answer %v", want)
	}
}

// listingUpstream answers ListGroups as every upstream broker's merged
// list: an unmanaged group, and managed groups with offsets alone (m1,
// which the coordinator holds too; m7, owned here; m5, owned elsewhere).
type listingUpstream struct{}

func (listingUpstream) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := req.(*kmsg.ListGroupsRequest); !ok {
		return nil, fmt.Errorf("unexpected %s upstream", kmsg.NameForKey(req.Key()))
	}
	resp := kmsg.NewPtrListGroupsResponse()
	for _, id := range []string{"u1", "m1", "m5", "m7"} {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.GroupState = id, "Empty"
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// TestIntercept_InAClusterEachManagedGroupIsListedAndDeletedOnlyAtItsOwner:
// ListGroups on a gateway's own node lists the managed groups it serves
// (held, or with offsets alone upstream) and no other; on a listener for
// an upstream broker, the broker's groups without the managed ones. A
// DeleteGroups of a group another gateway serves never reaches this
// gateway's coordinator, which would delete its offsets: it is answered
// NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS.
func TestIntercept_InAClusterEachManagedGroupIsListedAndDeletedOnlyAtItsOwner(t *testing.T) {
	fc := &fakeDriver{}
	g := New(Options{
		Manages: func(id string) bool { return strings.HasPrefix(id, "m") }, Driver: fc,
		Coordinators: &fakeUpstream{}, Ownership: fixedOwners{}, Upstream: listingUpstream{},
	})
	ctx := context.Background()
	names := func(resp kmsg.Response) []string {
		var out []string
		for _, grp := range resp.(*kmsg.ListGroupsResponse).Groups {
			out = append(out, grp.Group)
		}
		return out
	}
	d, err := g.Intercept(ctx, request(proxy.NodeBootstrap, kmsg.NewPtrListGroupsRequest()))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(d.Respond), []string{"m1", "m7"}; !slices.Equal(got, want) {
		t.Errorf("ListGroups on the gateway's own node: %v, want %v", got, want)
	}
	if d, err = g.Intercept(ctx, request(1, kmsg.NewPtrListGroupsRequest())); err != nil {
		t.Fatal(err)
	}
	up, _ := listingUpstream{}.Forward(ctx, kmsg.NewPtrListGroupsRequest())
	if d.Respond != nil || d.OnResponse == nil {
		t.Fatalf("ListGroups on a broker's listener: %+v, want it forwarded", d)
	}
	if got, want := names(d.OnResponse(up)), []string{"u1"}; !slices.Equal(got, want) {
		t.Errorf("ListGroups on a broker's listener: %v, want %v", got, want)
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{"m1", "m2", "m3", "u1"}
	before := len(fc.asked)
	if d, err = g.Intercept(ctx, request(1, del)); err != nil {
		t.Fatal(err)
	}
	if asked := fc.asked[before:]; len(asked) != 1 || !slices.Equal(asked[0].(*kmsg.DeleteGroupsRequest).Groups, []string{"m1"}) {
		t.Errorf("the coordinator was asked to delete %v, want only m1", asked)
	}
	if fwd, ok := d.Forward.(*kmsg.DeleteGroupsRequest); !ok || !slices.Equal(fwd.Groups, []string{"u1"}) {
		t.Fatalf("forwarded %+v, want u1 alone", d.Forward)
	}
	codes := map[string]int16{}
	for _, grp := range d.OnResponse(&kmsg.DeleteGroupsResponse{Groups: []kmsg.DeleteGroupsResponseGroup{{Group: "u1"}}}).(*kmsg.DeleteGroupsResponse).Groups {
		codes[grp.Group] = grp.ErrorCode
	}
	want := map[string]int16{"m1": kerr.NonEmptyGroup.Code, "m2": kerr.CoordinatorLoadInProgress.Code, "m3": kerr.NotCoordinator.Code, "u1": 0}
	if !maps.Equal(codes, want) {
		t.Errorf("DeleteGroups answered %v, want %v", codes, want)
	}
	del.Groups = []string{"m3"}
	before = len(fc.asked)
	if d, err = g.Intercept(ctx, request(1, del)); err != nil {
		t.Fatal(err)
	}
	if len(fc.asked) != before || d.Forward != nil || d.Respond == nil {
		t.Fatalf("DeleteGroups of a group served elsewhere alone: %+v (the coordinator asked %v)", d, len(fc.asked) != before)
	}
	if r := d.Respond.(*kmsg.DeleteGroupsResponse); len(r.Groups) != 1 || r.Groups[0].ErrorCode != kerr.NotCoordinator.Code || r.Version != 2 {
		t.Errorf("DeleteGroups of a group served elsewhere alone: %+v", r)
	}
}

// recordingForwarder answers every request with an empty response and
// keeps what it was sent.
type recordingForwarder struct {
	mu   sync.Mutex
	sent []kmsg.Request
}

func (f *recordingForwarder) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, req)
	return req.ResponseKind(), nil
}

// TestIntercept_InAClusterOffsetFetchAsksForStableOffsets: a cluster
// commits offsets in transactions, visible a moment after the commit is
// answered, so the owner's OffsetFetch upstream asks for stable offsets
// (from v7, where the field exists) instead of reading the older ones.
func TestIntercept_InAClusterOffsetFetchAsksForStableOffsets(t *testing.T) {
	up := &recordingForwarder{}
	g := New(Options{
		Manages: func(id string) bool { return strings.HasPrefix(id, "m") }, Driver: &fakeDriver{},
		Coordinators: &fakeUpstream{}, Ownership: fixedOwners{}, Upstream: up,
	})
	for _, tt := range []struct {
		version int16
		stable  bool
	}{{6, false}, {7, true}, {9, true}} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = tt.version
		if tt.version >= 8 {
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "m1"}}
		} else {
			req.Group = "m1"
		}
		if _, err := g.Intercept(context.Background(), request(1, req)); err != nil {
			t.Fatal(err)
		}
		up.mu.Lock()
		sent := up.sent[len(up.sent)-1].(*kmsg.OffsetFetchRequest)
		up.mu.Unlock()
		if sent.RequireStable != tt.stable {
			t.Errorf("OffsetFetch v%d upstream: RequireStable %v, want %v", tt.version, sent.RequireStable, tt.stable)
		}
	}
}

// aloneOwners is a gateway alone's view: no node of its own for any group.
type aloneOwners struct{}

func (aloneOwners) OwnerOf(group string) Owner {
	o := fixedOwners{}.OwnerOf(group)
	o.Node, o.Host, o.Port = -1, "", 0
	return o
}

// TestIntercept_AGatewayAloneIsFoundWhereItWouldBeWithoutACluster: a
// gateway in a cluster of its own is no node of its own, so
// FindCoordinator names each group it holds (serving or loading) by its
// upstream coordinator, as without a cluster, and no gateway for a group
// it does not hold; its requests of a group it does not serve are still
// refused.
func TestIntercept_AGatewayAloneIsFoundWhereItWouldBeWithoutACluster(t *testing.T) {
	g := New(Options{
		Manages: func(id string) bool { return strings.HasPrefix(id, "m") }, Driver: &fakeDriver{},
		Coordinators: &fakeUpstream{}, Ownership: aloneOwners{}, Upstream: &recordingForwarder{}, Alone: true,
	})
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version = 4
	find.CoordinatorKeys = []string{"m1", "m2", "m3"}
	d, err := g.Intercept(context.Background(), request(1, find))
	if err != nil {
		t.Fatal(err)
	}
	// fakeUpstream: m1's upstream coordinator is node 1, the others' 2.
	want := map[string]int32{"m1": 1, "m2": 2, "m3": -1}
	for _, c := range d.Respond.(*kmsg.FindCoordinatorResponse).Coordinators {
		if c.NodeID != want[c.Key] || (c.ErrorCode != 0) != (want[c.Key] < 0) {
			t.Errorf("FindCoordinator of %s: node %d, %v; want node %d", c.Key, c.NodeID, kerr.ErrorForCode(c.ErrorCode), want[c.Key])
		}
		delete(want, c.Key)
	}
	if len(want) > 0 {
		t.Errorf("FindCoordinator did not answer %v", want)
	}
	d, err = g.Intercept(context.Background(), request(1, &kmsg.HeartbeatRequest{Group: "m3"}))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := d.Respond.(*kmsg.HeartbeatResponse); !ok || r.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("a heartbeat of a group the gateway alone does not serve: %+v, want NOT_COORDINATOR", d.Respond)
	}
}
