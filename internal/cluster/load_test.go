package cluster

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/coordinator"
)

// Of four partitions, g2 and g6 hash to shard 0, g0 to shard 2.
const loadShards = 4

func stateRec(t *testing.T, group string, gen int32, w Writer) RawRecord {
	t.Helper()
	return encoded(t, Record{Kind: KindState, Group: group, Writer: w, State: stateOf(group, gen)})
}

func encoded(t *testing.T, r Record) RawRecord {
	t.Helper()
	k, v, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return RawRecord{Key: k, Value: v}
}

func TestLoadShard(t *testing.T) {
	a := Writer{ID: "gw-a", Incarnation: 1, Generation: 3}
	b := Writer{ID: "gw-b", Incarnation: 7, Generation: 4}
	claim := func(w Writer) RawRecord { return encoded(t, Record{Kind: KindClaim, Writer: w}) }
	release := func(w Writer) RawRecord { return encoded(t, Record{Kind: KindRelease, Writer: w}) }
	layout := func(n int) RawRecord {
		return encoded(t, Record{Kind: KindLayout, Layout: Layout{Partitions: n, Hash: "fnv1a64"}})
	}
	tombstone := func(g string) RawRecord { return encoded(t, Record{Kind: KindState, Group: g}) }
	for _, tc := range []struct {
		name    string
		records []RawRecord
		want    map[string]int32 // group -> generation
		clean   bool
		skipped map[string]int
		err     string
	}{
		{name: "empty: no gateway ever claimed it", clean: true},
		{name: "only the layout: no gateway ever claimed it", records: []RawRecord{layout(loadShards)}, clean: true},
		{
			name:    "the latest state of each group, a tombstone removing one",
			records: []RawRecord{layout(loadShards), claim(a), stateRec(t, "g2", 1, a), stateRec(t, "g6", 1, a), stateRec(t, "g2", 2, a), tombstone("g6")},
			want:    map[string]int32{"g2": 2},
		},
		{
			name:    "a release last: the next owner starts at once",
			records: []RawRecord{claim(a), stateRec(t, "g2", 5, a), release(a)},
			want:    map[string]int32{"g2": 5}, clean: true,
		},
		{
			name:    "a claim after the release: not clean",
			records: []RawRecord{claim(a), release(a), claim(b), stateRec(t, "g2", 6, b)},
			want:    map[string]int32{"g2": 6},
		},
		{
			name:    "a replaced owner's late state is fenced",
			records: []RawRecord{claim(a), stateRec(t, "g2", 5, a), claim(b), stateRec(t, "g2", 9, a), stateRec(t, "g6", 1, b)},
			want:    map[string]int32{"g2": 5, "g6": 1}, skipped: map[string]int{"fenced": 1},
		},
		{
			name:    "a group of another shard is skipped",
			records: []RawRecord{claim(a), stateRec(t, "g0", 1, a), stateRec(t, "g2", 1, a)},
			want:    map[string]int32{"g2": 1}, skipped: map[string]int{"shard": 1},
		},
		{
			name: "corrupt records are skipped and counted",
			records: []RawRecord{claim(a), {Key: []byte{0x01, 'g', '2'}, Value: []byte("not a record")},
				{Key: nil, Value: []byte("x")}, stateRec(t, "g2", 3, a)},
			want: map[string]int32{"g2": 3}, skipped: map[string]int{"magic": 1, "key": 1},
		},
		{
			name:    "a newer format refuses the shard",
			records: []RawRecord{claim(a), {Offset: 9, Key: []byte{0x01, 'g', '2'}, Value: []byte("WA\x09\x01{}")}},
			err:     "offset 9: state record in format 9",
		},
		{
			name:    "a layout of another partition count refuses the shard",
			records: []RawRecord{layout(16)},
			err:     "laid out for 16 partitions, and this gateway for 4",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh, err := LoadShard(0, loadShards, tc.records)
			if tc.err != "" {
				var newer *NewerFormatError
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				if strings.Contains(tc.err, "format") && !errors.As(err, &newer) {
					t.Fatalf("err %v is no *NewerFormatError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int32{}
			for g, st := range sh.States {
				got[g] = st.Generation
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("states %v, want %v", got, tc.want)
			}
			if sh.Clean != tc.clean {
				t.Errorf("clean %v, want %v", sh.Clean, tc.clean)
			}
			if !maps.Equal(sh.Skipped, tc.skipped) {
				t.Errorf("skipped %v, want %v", sh.Skipped, tc.skipped)
			}
		})
	}
}

// FuzzLoadShard feeds the loader records cut from arbitrary bytes, among
// real ones: it must never panic, and whatever it keeps belongs to the
// shard.
func FuzzLoadShard(f *testing.F) {
	k, v, _ := Encode(Record{Kind: KindState, Group: "g2", State: &coordinator.GroupState{Group: "g2", Generation: 1}})
	f.Add(k, v, []byte{0x00, 'c', 't', 'l'})
	f.Add([]byte{0x01}, []byte("WA\x01\x01{\"state\":{}}"), []byte(nil))
	f.Fuzz(func(t *testing.T, k1, v1, k2 []byte) {
		recs := []RawRecord{{Key: k1, Value: v1}, {Key: k2, Value: v1}, {Key: k1}, {Key: k, Value: v}}
		sh, err := LoadShard(0, loadShards, recs)
		if err != nil {
			return
		}
		for g := range sh.States {
			if ShardOf(g, loadShards) != 0 {
				t.Fatalf("kept group %q of shard %d", g, ShardOf(g, loadShards))
			}
		}
	})
}
