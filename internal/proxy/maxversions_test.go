package proxy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A key the interceptor answers at fewer versions than the upstream must
// be offered only at those: a client picks the newest version offered, and
// the interceptor would refuse it (seen with Kafka 4.4's DescribeGroups v6
// and DeleteGroups v3 against a coordinator that stops at v5 and v2).
func TestProxy_ApiVersionsCapsKeysTheInterceptorAnswersAtFewerVersions(t *testing.T) {
	const capped, capAt, free = int16(kmsg.DescribeGroups), int16(2), int16(kmsg.Metadata)
	e := startEnv(t, 1, func(o *Options) {
		o.MaxVersions = func(key int16) (int16, bool) {
			if key == capped {
				return capAt, true
			}
			return 0, false
		}
	})
	r := dialRaw(t, e.proxy.Addr())
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	resp := r.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: error %d", resp.ErrorCode)
	}
	got := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = k
	}
	if k, ok := got[capped]; !ok || k.MaxVersion != capAt {
		t.Errorf("DescribeGroups offered %+v (present %v); want max v%d", k, ok, capAt)
	}
	// The cap leaves other keys alone: the upstream (kfake) and kmsg both
	// speak Metadata far beyond v2.
	if k, ok := got[free]; !ok || k.MaxVersion <= capAt {
		t.Errorf("Metadata offered %+v (present %v); an uncapped key lost versions", k, ok)
	}
}
