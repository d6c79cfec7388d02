package gateway

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzedKeys are the requests whose upstream answers the gateway changes
// before the client sees them (Decision.OnResponse).
var fuzzedKeys = []kmsg.Key{kmsg.OffsetFetch, kmsg.DescribeGroups, kmsg.DeleteGroups, kmsg.ListGroups, kmsg.FindCoordinator}

// fuzzRequest is a request for key at version naming a managed group (m1,
// m2) and an unmanaged one (u1), as a client of both kinds sends it.
func fuzzRequest(key kmsg.Key, version int16) kmsg.Request {
	req := kmsg.RequestForKey(int16(key))
	req.SetVersion(version)
	switch r := req.(type) {
	case *kmsg.OffsetFetchRequest:
		topics := []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 2}}}
		if version >= 8 {
			for _, g := range []string{"m1", "u1", "m2"} {
				r.Groups = append(r.Groups, kmsg.OffsetFetchRequestGroup{Group: g, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{1}}}})
			}
		} else {
			r.Group, r.Topics = "m1", topics
		}
	case *kmsg.DescribeGroupsRequest:
		r.Groups = []string{"u1", "m1", "m2"}
	case *kmsg.DeleteGroupsRequest:
		r.Groups = []string{"m1", "u1"}
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey = "u1"
		if version >= 4 {
			r.CoordinatorKeys = []string{"m1", "u1", "m2"}
		}
	}
	return req
}

// FuzzRewrittenUpstreamAnswers feeds the gateway's rewrite of each such
// answer, at every version, with whatever bytes decode as one: it must
// not panic, and what it hands the client must encode into an answer of
// the same version that decodes again.
func FuzzRewrittenUpstreamAnswers(f *testing.F) {
	for sel, key := range fuzzedKeys {
		max := kmsg.ResponseForKey(int16(key)).MaxVersion()
		for v := int16(0); v <= max; v += 3 {
			resp := kmsg.ResponseForKey(int16(key))
			resp.SetVersion(v)
			switch r := resp.(type) {
			case *kmsg.OffsetFetchResponse:
				r.ErrorCode = kerr.GroupIDNotFound.Code
				r.Groups = []kmsg.OffsetFetchResponseGroup{{Group: "m1", ErrorCode: kerr.NotCoordinator.Code}, {Group: "u1"}}
			case *kmsg.DescribeGroupsResponse:
				r.Groups = []kmsg.DescribeGroupsResponseGroup{{Group: "u1", State: "Stable"}, {Group: "x"}}
			case *kmsg.ListGroupsResponse:
				r.Groups = []kmsg.ListGroupsResponseGroup{{Group: "m1", ProtocolType: "consumer"}, {Group: "u1"}}
			case *kmsg.FindCoordinatorResponse:
				r.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{{Key: "u1", NodeID: 2, Host: "h", Port: 1}}
			}
			f.Add(uint8(sel), uint8(v), resp.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, sel, v uint8, body []byte) {
		key := fuzzedKeys[int(sel)%len(fuzzedKeys)]
		resp := kmsg.ResponseForKey(int16(key))
		version := int16(v) % (resp.MaxVersion() + 1)
		resp.SetVersion(version)
		if err := resp.ReadFrom(body); err != nil {
			return
		}
		g, _ := newGateway(&bytes.Buffer{})
		d, err := g.Intercept(context.Background(), request(1, fuzzRequest(key, version)))
		if err != nil {
			t.Fatalf("%s v%d: %v", key.Name(), version, err)
		}
		if d.OnResponse == nil {
			return // answered here or passed through: nothing rewritten
		}
		out := d.OnResponse(resp)
		if out.Key() != int16(key) {
			t.Fatalf("%s v%d answered with a %s", key.Name(), version, kmsg.NameForKey(out.Key()))
		}
		out.SetVersion(version)
		again := kmsg.ResponseForKey(int16(key))
		again.SetVersion(version)
		if err := again.ReadFrom(out.AppendTo(nil)); err != nil {
			t.Fatalf("%s v%d: the rewritten answer does not decode: %v", key.Name(), version, err)
		}
	})
}
