package sticky

import (
	"slices"
	"testing"
)

// TestStickyUserDataGeneration_ReadsV1AndTreatsTheRestAsNone checks the
// generation Kafka's maxGeneration takes from StickyAssignor user data.
func TestStickyUserDataGeneration_ReadsV1AndTreatsTheRestAsNone(t *testing.T) {
	tests := []struct {
		name string
		ud   []byte
		want int32
	}{
		{"none", nil, -1},
		{"v1 with partitions", stickyUserData([]string{"t-0", "t-3", "u-1"}, 7, true), 7},
		{"v1 owning nothing", stickyUserData(nil, 9, true), 9},
		{"v0", stickyUserData([]string{"t-0"}, 7, false), -1},
		{"truncated", stickyUserData([]string{"t-0"}, 7, true)[:9], -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stickyUserDataGeneration(tt.ud); got != tt.want {
				t.Errorf("generation %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPreviousGeneration_IsTheNewestOlderClaim checks Kafka's
// prevAssignment: per partition, the claim of the highest generation below
// the newest any member reports, where a member that owns nothing still
// counts towards the newest.
func TestPreviousGeneration_IsTheNewestOlderClaim(t *testing.T) {
	c := cluster{topics: []topicSpec{{"t", 3}}}
	all := []string{"t"}
	for _, k := range []kind{eager, coop} {
		t.Run(k.String(), func(t *testing.T) {
			ms := []memberSpec{
				owns("a", all, 3, "t-0"),
				owns("b", all, 2, "t-0", "t-1"),
				owns("c", all, 1, "t-1", "t-2"),
				owns("d", all, 4),
			}
			g, err := newGroup(c.request(k, 5, ms))
			if err != nil {
				t.Fatal(err)
			}
			g.cooperative = k == coop
			prev := g.previousGeneration(make([]int32, 3))
			var got []string
			for _, m := range prev {
				got = append(got, g.req.Members[m].MemberID)
			}
			// d's generation 4 makes a's claim (3) an older one too.
			if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
				t.Fatalf("previous owners %v, want %v", got, want)
			}
		})
	}
}
