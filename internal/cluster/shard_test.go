package cluster

import "testing"

// TestShardOf_IsFixedAndSpreads pins the hash (every gateway of a cluster,
// of any version, must place a group alike) and checks that a thousand
// groups spread over the shards.
func TestShardOf_IsFixedAndSpreads(t *testing.T) {
	for _, tc := range []struct {
		group string
		want  int
	}{
		{"orders", 12}, {"payments", 6}, {"demo-group", 8}, {"", 5},
	} {
		if got := ShardOf(tc.group, 16); got != tc.want {
			t.Errorf("ShardOf(%q, 16) = %d, want %d", tc.group, got, tc.want)
		}
	}
	counts := make([]int, 16)
	for i := range 1600 {
		s := ShardOf("group-"+string(rune('a'+i%26))+string(rune('0'+i/26%10))+string(rune('0'+i/260)), 16)
		if s < 0 || s >= 16 {
			t.Fatalf("shard %d out of 16", s)
		}
		counts[s]++
	}
	for s, n := range counts {
		if n < 50 || n > 150 {
			t.Errorf("shard %d holds %d of 1,600 groups; want about 100", s, n)
		}
	}
	if got := ShardOf("orders", 0); got != 0 {
		t.Errorf("ShardOf of no partitions = %d, want 0", got)
	}
}
