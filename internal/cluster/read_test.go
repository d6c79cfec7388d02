package cluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmassign/wasmassign/coordinator"
)

// TestReadShard_ReadsCommittedRecordsUpToTheReadersOwnClaim: a shard holds
// states, a transaction that was aborted, and then the reader's committed
// claim; the read returns the states and the claim in order, nothing of
// the aborted transaction, and nothing of the other shard.
func TestReadShard_ReadsCommittedRecordsUpToTheReadersOwnClaim(t *testing.T) {
	ctx, opts := kfakeStateTopic(t)
	seeds := opts[0]
	const topic = testTopic
	produce := func(cl *kgo.Client, shard int32, r Record) {
		t.Helper()
		k, v, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: shard, Key: k, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	manual := func(extra ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{seeds, kgo.RecordPartitioner(kgo.ManualPartitioner())}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	old := Writer{ID: "gw-old", Incarnation: 1}
	me := Writer{ID: "gw-me", Incarnation: 2}
	plain := manual()
	for i := range 3 {
		produce(plain, 0, Record{Kind: KindState, Group: "g2", Writer: old, State: stateOf("g2", int32(i))})
	}
	produce(plain, 1, Record{Kind: KindState, Group: "g1", Writer: old, State: stateOf("g1", 1)})

	txn := manual(kgo.TransactionalID("wasmassign/t/0"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(txn, 0, Record{Kind: KindState, Group: "g6", Writer: me, State: stateOf("g6", 9)})
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(txn, 0, Record{Kind: KindClaim, Writer: me})
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	claimKey, claimValue, _ := Encode(Record{Kind: KindClaim, Writer: me})
	recs, err := ReadShard(ctx, []kgo.Opt{seeds}, topic, 0, func(r RawRecord) bool {
		return bytes.Equal(r.Key, claimKey) && bytes.Equal(r.Value, claimValue)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		d, err := Decode(r.Key, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%v %s %s", d.Kind, d.Group, d.Writer.ID))
	}
	want := []string{"state g2 gw-old", "state g2 gw-old", "state g2 gw-old", "claim  gw-me"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	sh, err := LoadShard(0, 2, recs)
	if err != nil || len(sh.States) != 1 || sh.States["g2"].Generation != 2 || sh.Clean {
		t.Fatalf("loaded %+v, %v", sh, err)
	}

	// A claim that never comes: only the context ends the wait.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, err := ReadShard(short, []kgo.Opt{seeds}, topic, 0, func(RawRecord) bool { return false }); err == nil {
		t.Fatal("a read with no end returned")
	}
}

// testTopic is the state topic of the tests on kfake, of two shards.
const testTopic = "wasmassign-t-state"

// kfakeStateTopic starts kfake with testTopic and returns a context bounding
// the test and the options of a client of the cluster.
func kfakeStateTopic(t *testing.T) (context.Context, []kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, cl := kfakeClient(t)
	if _, err := EnsureStateTopic(ctx, cl, testTopic, 2); err != nil {
		t.Fatal(err)
	}
	return ctx, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
}

func stateOf(group string, gen int32) *coordinator.GroupState {
	return &coordinator.GroupState{Group: group, State: "Stable", Generation: gen}
}
