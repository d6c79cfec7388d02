package gateway

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The upstream lists every managed group the gateway forwarded commits for
// (generation -1 makes it a group without members there). That is the
// gateway working, not split brain: only a listing that may have members
// is an error.
func TestIntercept_ListGroupsLogsSplitBrainOnlyForUpstreamGroupsWithMembers(t *testing.T) {
	for _, tt := range []struct {
		name        string
		upstream    kmsg.ListGroupsResponseGroup
		splitBrain  bool
		listedState string
	}{
		{"only commits (no protocol type), v4+", kmsg.ListGroupsResponseGroup{Group: "m2", GroupState: "Empty"}, false, "Stable"},
		{"only commits, before v4 (no state)", kmsg.ListGroupsResponseGroup{Group: "m2"}, false, "Stable"},
		{"members left, Empty", kmsg.ListGroupsResponseGroup{Group: "m2", ProtocolType: "consumer", GroupState: "Empty"}, false, "Stable"},
		{"members upstream", kmsg.ListGroupsResponseGroup{Group: "m2", ProtocolType: "consumer", GroupState: "Stable"}, true, "Stable"},
		{"had members, before v4 (no state)", kmsg.ListGroupsResponseGroup{Group: "m2", ProtocolType: "consumer"}, true, "Stable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			g, _ := newGateway(&logs)
			d, err := g.Intercept(context.Background(), request(2, &kmsg.ListGroupsRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			up := &kmsg.ListGroupsResponse{Groups: []kmsg.ListGroupsResponseGroup{tt.upstream}}
			var m2 []kmsg.ListGroupsResponseGroup
			for _, grp := range d.OnResponse(up).(*kmsg.ListGroupsResponse).Groups {
				if grp.Group == "m2" {
					m2 = append(m2, grp)
				}
			}
			if len(m2) != 1 || m2[0].GroupState != tt.listedState {
				t.Errorf("m2 listed as %+v; want once, as the coordinator sees it (%s)", m2, tt.listedState)
			}
			if logged := strings.Contains(logs.String(), "ERROR"); logged != tt.splitBrain {
				t.Errorf("split brain logged %v, want %v; log: %s", logged, tt.splitBrain, logs.String())
			}
		})
	}
}
