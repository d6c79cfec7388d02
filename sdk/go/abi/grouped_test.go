package abi_test

import (
	"reflect"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// plainEntries is what a request's member entries stand for, every topic an
// entry of its own, for comparing layouts.
func plainEntries(lists [][]int32, tps []abi.TopicPartitions) []abi.TopicPartitions {
	return canonicalTPs(abi.AppendExpanded(nil, lists, tps))
}

func TestGrouped_ExpandsBackToTheSameEntries(t *testing.T) {
	g := newGen(11)
	for i := range propertyIterations {
		r := g.request()
		grouped := r.Grouped()
		if grouped.TopicLists == nil {
			t.Fatalf("iteration %d: Grouped returned no topic-list table", i)
		}
		back := grouped.Expanded()
		if back.TopicLists != nil {
			t.Fatalf("iteration %d: Expanded kept the topic-list table", i)
		}
		for k := range r.Members {
			want := r.Members[k]
			for _, pair := range []struct {
				name      string
				got, want []abi.TopicPartitions
			}{
				{"owned", back.Members[k].Owned, plainEntries(r.TopicLists, want.Owned)},
				{"previous", back.Members[k].Previous, plainEntries(r.TopicLists, want.Previous)},
			} {
				if got := canonicalTPs(pair.got); !reflect.DeepEqual(got, pair.want) {
					t.Fatalf("iteration %d, member %d %s: %v, want %v", i, k, pair.name, got, pair.want)
				}
			}
		}
		// The grouped form survives the wire.
		checkRequestRoundTrip(t, grouped)
	}
}

func TestGrouper_TurnsRoundRobinSharesIntoOneEntryPerMember(t *testing.T) {
	// Member m of a group owns partition m of each of 50 topics, as Kafka's
	// round robin deals a group of equal topics.
	const members, topics = 40, 50
	r := &abi.Request{}
	for t := range topics {
		r.Topics = append(r.Topics, abi.Topic{Name: string(rune('A' + t)), Exists: true, PartitionCount: members})
	}
	for m := range members {
		mem := abi.Member{MemberID: string(rune('a' + m))}
		for t := range topics {
			mem.Owned = append(mem.Owned, abi.TopicPartitions{Topic: int32(t), Partitions: []int32{int32(m)}})
		}
		r.Members = append(r.Members, mem)
	}
	g := r.Grouped()
	if len(g.TopicLists) != 1 || len(g.TopicLists[0]) != topics {
		t.Fatalf("topic lists %v, want one list of all %d topics", g.TopicLists, topics)
	}
	for m, mem := range g.Members {
		if len(mem.Owned) != 1 || mem.Owned[0].Topic != abi.ListRef(0) || mem.Owned[0].Partitions[0] != int32(m) {
			t.Fatalf("member %d owns %v, want one entry over list 0", m, mem.Owned)
		}
	}
	back := g.Expanded()
	if !reflect.DeepEqual(back.Members, r.Members) {
		t.Fatalf("expanding the grouped request changed the members")
	}
}

func TestResponseExpanded_ListsEveryTopicOfEachList(t *testing.T) {
	g := newGen(12)
	for i := range propertyIterations {
		r := g.response()
		x := r.Expanded()
		if x.TopicLists != nil {
			t.Fatalf("iteration %d: Expanded kept the topic-list table", i)
		}
		if r.Error != "" {
			continue
		}
		for k, ma := range r.Members {
			var want []abi.TopicPartitions
			for _, tp := range ma.Partitions {
				if tp.Topic < 0 && r.TopicLists != nil {
					for _, topic := range r.TopicLists[^tp.Topic] {
						want = append(want, abi.TopicPartitions{Topic: topic, Partitions: tp.Partitions})
					}
					continue
				}
				want = append(want, tp)
			}
			if got := x.Members[k]; got.Member != ma.Member || !reflect.DeepEqual(canonicalTPs(got.Partitions), canonicalTPs(want)) {
				t.Fatalf("iteration %d, assignment %d: %v, want %v", i, k, got.Partitions, want)
			}
		}
	}
}

// TestSameSlice_IsIdentityNotEquality: the codec shares one subscription
// slice among members and tells repeats apart by the slice header, which
// slices.Equal would not do.
func TestSameSlice_IsIdentityNotEquality(t *testing.T) {
	a := []int32{1, 2, 3}
	if !abi.SameSlice(a, a) || !abi.SameSlice(nil, []int32{}) {
		t.Error("a slice is not the same as itself")
	}
	if abi.SameSlice(a, []int32{1, 2, 3}) || abi.SameSlice(a, a[:2]) || abi.SameSlice(a[1:], a[:2]) {
		t.Error("distinct slices are the same")
	}
}
