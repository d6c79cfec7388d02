package cluster

import (
	"bytes"
	"errors"
	"testing"
)

// TestOpenShard_TheNextOwnersClaimFencesThePreviousOwner: A claims a shard
// and writes a state; B claims it; A's next write fails as fenced and is
// never read; B's read up to its claim shows A's first state, and B's
// release makes the shard clean.
func TestOpenShard_TheNextOwnersClaimFencesThePreviousOwner(t *testing.T) {
	ctx, opts := kfakeStateTopic(t)
	const topic = testTopic
	a, b := Writer{ID: "gw-a", Incarnation: 1}, Writer{ID: "gw-b", Incarnation: 1}
	wa, err := OpenShard(ctx, opts, "t", topic, 0, a)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	if err := wa.Write(ctx, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 1)}}); err != nil {
		t.Fatal(err)
	}
	wb, err := OpenShard(ctx, opts, "t", topic, 0, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := wa.Write(ctx, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 7)}}); !errors.Is(err, ErrFencedWrite) {
		t.Fatalf("the replaced owner's write: %v, want ErrFencedWrite", err)
	}
	k, v, _ := Encode(Record{Kind: KindClaim, Writer: b})
	recs, err := ReadShard(ctx, opts, topic, 0, func(r RawRecord) bool { return bytes.Equal(r.Key, k) && bytes.Equal(r.Value, v) })
	if err != nil {
		t.Fatal(err)
	}
	sh, err := LoadShard(0, 2, recs)
	if err != nil || sh.States["g2"].Generation != 1 || sh.Owner != b || sh.Clean {
		t.Fatalf("B loaded %+v (%v): want A's first state under B's claim", sh, err)
	}
	if err := wb.Write(ctx, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 2)}}); err != nil {
		t.Fatal(err)
	}
	if err := wb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rk, rv, _ := Encode(Record{Kind: KindRelease, Writer: b})
	recs, err = ReadShard(ctx, opts, topic, 0, func(r RawRecord) bool { return bytes.Equal(r.Key, rk) && bytes.Equal(r.Value, rv) })
	if err != nil {
		t.Fatal(err)
	}
	if sh, err = LoadShard(0, 2, recs); err != nil || sh.States["g2"].Generation != 2 || !sh.Clean {
		t.Fatalf("after B's release: %+v (%v)", sh, err)
	}
}
