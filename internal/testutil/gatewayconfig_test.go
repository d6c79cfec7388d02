package testutil_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/testutil"
)

func TestGatewayConfig_ParsesToWhatItDescribes(t *testing.T) {
	tests := []struct {
		name string
		c    testutil.GatewayConfig
	}{
		{name: "zero value: embedded upstream, no rules"},
		{name: "embedded cluster with racks and rules", c: testutil.GatewayConfig{
			EmbeddedBrokers: 3, EmbeddedTopics: []string{"events:6:1", "more:2"},
			BrokerRacks: map[int32]string{0: "az-a", 1: "az-b", 2: "az-c"},
			Groups:      []testutil.GroupRule{{Match: "rr-*", Assignor: "roundrobin"}, {Match: "*"}},
			Extra:       "[[racks]]\nclient_id = \"^a\"\nrack = \"az-a\"",
		}},
		{name: "real upstream with SASL, fixed ports and state", c: testutil.GatewayConfig{
			Listen: "127.0.0.1:19092", AdminListen: "127.0.0.1:19093",
			BrokerPorts: map[int32]int{0: 19094, 1: 19095},
			Server:      "state_dir = \"/tmp/state\"",
			Brokers:     []string{"127.0.0.1:9092", "127.0.0.1:9093"},
			Upstream:    "sasl_mechanism = \"PLAIN\"\nsasl_user = \"u\"\nsasl_password = \"p\"\n",
			Groups:      []testutil.GroupRule{{Match: "up-*"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.c.String()
			got, err := config.Parse([]byte(text), "gateway.toml", t.TempDir())
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			s, u := got.Server, got.Upstream
			wantListen, wantAdmin := tt.c.Listen, tt.c.AdminListen
			if wantListen == "" {
				wantListen, wantAdmin = "127.0.0.1:0", "127.0.0.1:0"
			}
			if s.Listen != wantListen || s.AdminListen != wantAdmin || s.AdvertisedHost != "127.0.0.1" {
				t.Errorf("listeners %q %q advertised %q", s.Listen, s.AdminListen, s.AdvertisedHost)
			}
			if len(tt.c.BrokerPorts) > 0 && !maps.Equal(s.BrokerPorts, tt.c.BrokerPorts) {
				t.Errorf("broker ports %v, want %v", s.BrokerPorts, tt.c.BrokerPorts)
			}
			if len(tt.c.BrokerPorts) == 0 && s.BrokerPortBase != 0 {
				t.Errorf("broker port base %d, want 0 (ephemeral)", s.BrokerPortBase)
			}
			if !slices.Equal(u.Brokers, tt.c.Brokers) || u.MetadataRefresh != time.Second {
				t.Errorf("upstream %v refreshed every %v", u.Brokers, u.MetadataRefresh)
			}
			if len(tt.c.BrokerRacks) > 0 && !maps.Equal(u.BrokerRacks, tt.c.BrokerRacks) {
				t.Errorf("broker racks %v, want %v", u.BrokerRacks, tt.c.BrokerRacks)
			}
			if tt.c.EmbeddedBrokers > 0 && (u.Embedded.Brokers != tt.c.EmbeddedBrokers || len(u.Embedded.Topics) != len(tt.c.EmbeddedTopics)) {
				t.Errorf("embedded %+v, want %d brokers and topics %v", u.Embedded, tt.c.EmbeddedBrokers, tt.c.EmbeddedTopics)
			}
			if len(got.Groups) != len(tt.c.Groups) {
				t.Fatalf("%d group rules, want %d:\n%s", len(got.Groups), len(tt.c.Groups), text)
			}
			for i, g := range got.Groups {
				want := tt.c.Groups[i]
				if g.Match != want.Match || g.Assignor != want.Assignor || g.InitialRebalanceDelay != 0 || g.MinSessionTimeout != time.Second {
					t.Errorf("rule %d: %+v, want %+v without delay and 1s sessions allowed", i, g, want)
				}
			}
			if tt.c.Extra != "" && len(got.Racks) != 1 {
				t.Errorf("racks %+v: the extra text was lost", got.Racks)
			}
		})
	}
}
