package daemon

import (
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/wasmassign/wasmassign/coordinator"
)

// TestTopicView_OnlyAConfirmedAbsenceIsADeletion follows one topic through
// refreshes: a topic error other than UNKNOWN_TOPIC_OR_PARTITION keeps the
// last known metadata (and is reported once, when it starts), a topic never
// known that fails stays uncovered, and UNKNOWN_TOPIC_OR_PARTITION is a
// deletion.
func TestTopicView_OnlyAConfirmedAbsenceIsADeletion(t *testing.T) {
	four := coordinator.TopicMetadata{Partitions: make([]coordinator.PartitionMetadata, 4)}
	v := newTopicView()
	type refresh struct {
		name        string
		present     map[string]coordinator.TopicMetadata
		failed      map[string]int16
		wantTopics  []string // in the completed metadata
		wantCovered []string
		wantNew     []string // errors reported as new
	}
	steps := []refresh{
		{"both known", map[string]coordinator.TopicMetadata{"t": four, "u": four}, nil, []string{"t", "u"}, []string{"t", "u"}, nil},
		{"an election", map[string]coordinator.TopicMetadata{"u": four}, map[string]int16{"t": kerr.LeaderNotAvailable.Code}, []string{"t", "u"}, []string{"t", "u"}, []string{"t"}},
		{"still failing, now unauthorized", map[string]coordinator.TopicMetadata{"u": four}, map[string]int16{"t": kerr.TopicAuthorizationFailed.Code}, []string{"t", "u"}, []string{"t", "u"}, []string{"t"}},
		{"the same error again", map[string]coordinator.TopicMetadata{"u": four}, map[string]int16{"t": kerr.TopicAuthorizationFailed.Code}, []string{"t", "u"}, []string{"t", "u"}, nil},
		{"back", map[string]coordinator.TopicMetadata{"t": four, "u": four}, nil, []string{"t", "u"}, []string{"t", "u"}, nil},
		{"deleted", map[string]coordinator.TopicMetadata{"u": four}, map[string]int16{"t": kerr.UnknownTopicOrPartition.Code}, []string{"u"}, []string{"t", "u"}, nil},
		{"a deleted topic that then fails stays uncovered", map[string]coordinator.TopicMetadata{"u": four}, map[string]int16{"t": kerr.LeaderNotAvailable.Code}, []string{"u"}, []string{"u"}, []string{"t"}},
	}
	for _, s := range steps {
		md := &coordinator.Metadata{Topics: maps.Clone(s.present)}
		if md.Topics == nil {
			md.Topics = map[string]coordinator.TopicMetadata{}
		}
		covered, fresh := v.apply(md, s.failed, []string{"t", "u"})
		if got := slices.Sorted(maps.Keys(md.Topics)); !slices.Equal(got, s.wantTopics) {
			t.Errorf("%s: topics %v, want %v", s.name, got, s.wantTopics)
		}
		if slices.Sort(covered); !slices.Equal(covered, s.wantCovered) {
			t.Errorf("%s: covered %v, want %v", s.name, covered, s.wantCovered)
		}
		if got := slices.Sorted(maps.Keys(fresh)); !slices.Equal(got, s.wantNew) && (len(got) > 0 || len(s.wantNew) > 0) {
			t.Errorf("%s: new errors %v, want %v", s.name, got, s.wantNew)
		}
	}
	v.apply(&coordinator.Metadata{Topics: map[string]coordinator.TopicMetadata{}}, nil, nil)
	if len(v.known) != 0 || len(v.failing) != 0 {
		t.Errorf("topics no group subscribes to are remembered: %v %v", v.known, v.failing)
	}
}
