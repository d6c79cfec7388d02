package coordinator

import (
	"strings"
	"testing"
	"time"
)

func TestConfig_RulesApplyInOrderAfterExactGroups(t *testing.T) {
	cfg := Config{
		Default: GroupConfig{Fallback: "default"},
		Groups:  map[string]GroupConfig{"billing-exact": {Fallback: "exact"}},
		Rules: []GroupRule{
			{Match: func(g string) bool { return strings.HasPrefix(g, "billing-") }, Config: GroupConfig{Fallback: "billing", InitialRebalanceDelay: -1}},
			{Match: func(g string) bool { return true }, Config: GroupConfig{Fallback: "any"}},
		},
	}
	if err := cfg.prepare(); err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]string{"billing-exact": "exact", "billing-eu": "billing", "orders": "any"} {
		if got := cfg.groupConfigFor(group).Fallback; got != want {
			t.Errorf("%s: fallback %q, want %q", group, got, want)
		}
	}
	if d := cfg.groupConfigFor("billing-eu").InitialRebalanceDelay; d != 0 {
		t.Errorf("a rule's negative delay must mean none, got %v", d)
	}
	if d := cfg.groupConfigFor("orders").InitialRebalanceDelay; d != 3*time.Second {
		t.Errorf("a rule's zero delay must mean Kafka's default, got %v", d)
	}
	bad := Config{Rules: []GroupRule{{Config: GroupConfig{}}}}
	if err := bad.prepare(); err == nil || !strings.Contains(err.Error(), "rules[0]") {
		t.Errorf("a rule without Match: %v", err)
	}
}
