package consumerproto

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// expandRuns lists the entries that runs stand for, in order.
func expandRuns(runs []OwnedRun) []Owned {
	var out []Owned
	for _, r := range runs {
		for _, id := range r.Topics {
			out = append(out, Owned{Topic: id, Partitions: r.Partitions})
		}
	}
	return out
}

// checkRunsAgree decodes b both ways, with decoders that have seen the same
// subscriptions before, and fails unless the runs stand for exactly the
// entries Decode returns, with no two neighbouring runs that could be one.
func checkRunsAgree(t *testing.T, plain, runs *Decoder, b []byte) {
	t.Helper()
	want, err := plain.Decode(b)
	got, errRuns := runs.DecodeRuns(b)
	if (err == nil) != (errRuns == nil) {
		t.Fatalf("Decode error %v, DecodeRuns error %v", err, errRuns)
	}
	if err != nil {
		return
	}
	if got.Owned != nil {
		t.Fatalf("DecodeRuns set Owned")
	}
	if x := expandRuns(got.OwnedRuns); !reflect.DeepEqual(nilIfEmpty(x), nilIfEmpty(want.Owned)) {
		t.Fatalf("runs stand for %v, Decode gives %v", x, want.Owned)
	}
	for i := 1; i < len(got.OwnedRuns); i++ {
		if slices.Equal(got.OwnedRuns[i].Partitions, got.OwnedRuns[i-1].Partitions) {
			t.Fatalf("runs %d and %d have equal partitions %v and were not joined", i-1, i, got.OwnedRuns[i].Partitions)
		}
	}
	want.Owned, got.OwnedRuns = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the other fields differ: %+v, want %+v", got, want)
	}
}

func nilIfEmpty(o []Owned) []Owned {
	if len(o) == 0 {
		return nil
	}
	return o
}

func TestDecodeRuns_StandsForWhatDecodeReads(t *testing.T) {
	pool := []string{"orders", "payments", "a", "zz", "topic-with-a-long-name-0001", "ünïcode"}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, version := range []int16{0, 1, 2, 3} {
		plain, runs := NewDecoder(NewNames()), NewDecoder(NewNames())
		for range 300 {
			m := randomMetadata(rng, version, pool)
			if rng.IntN(2) == 0 {
				// Equal partitions across neighbouring topics, as Kafka's
				// round robin deals them.
				p := []int32{rng.Int32N(4)}
				for i := range m.OwnedPartitions {
					if rng.IntN(4) > 0 {
						m.OwnedPartitions[i].Partitions = p
					}
				}
			}
			checkRunsAgree(t, plain, runs, m.AppendTo(nil))
		}
	}
}

func TestDecodeRuns_RoundRobinShareIsOneRunSharedByMembers(t *testing.T) {
	d := NewDecoder(NewNames())
	var prev []int32
	for member := range 5 {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = 3
		for t := range 40 {
			name := fmt.Sprintf("t%02d", t)
			m.Topics = append(m.Topics, name)
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic, op.Partitions = name, []int32{int32(member)}
			m.OwnedPartitions = append(m.OwnedPartitions, op)
		}
		s, err := d.DecodeRuns(m.AppendTo(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.OwnedRuns) != 1 || len(s.OwnedRuns[0].Topics) != 40 || s.OwnedRuns[0].Partitions[0] != int32(member) {
			t.Fatalf("member %d: runs %+v, want one run of 40 topics", member, s.OwnedRuns)
		}
		if prev != nil && &prev[0] != &s.OwnedRuns[0].Topics[0] {
			t.Fatalf("member %d: the run's topic ids are not shared with the previous member's", member)
		}
		prev = s.OwnedRuns[0].Topics
	}
}

func FuzzDecodeRuns(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for v := range int16(4) {
		m := randomMetadata(rng, v, []string{"a", "b", "c"})
		f.Add(m.AppendTo(nil))
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRunsAgree(t, NewDecoder(NewNames()), NewDecoder(NewNames()), b)
	})
}
