package abi_test

import (
	"fmt"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// The benchmarks measure the codec at the size the ABI was designed for: a
// group of 2,000 members subscribed to 500 topics of 2,000 partitions each,
// one million partitions in all, rejoining cooperatively. Each member reports
// the 500 partitions it owns (one per topic, as a per-topic range assignment
// leaves them) and the host repeats them as its previous assignment. The
// minimal cases show the fixed cost of a call.

const (
	benchTopics     = 500
	benchPartitions = 2000
	benchMembers    = 2000
)

// benchRequest builds the large request. Six brokers in three racks with
// replication factor 3 give six replica sets, shared by all partitions.
func benchRequest() *abi.Request {
	r := &abi.Request{
		GroupID:           "orders-consumers",
		Generation:        10,
		Protocol:          "cooperative-sticky",
		Assignor:          "rack-sticky",
		RebalanceProtocol: abi.Cooperative,
		Seed:              0x5eed,
		Config:            map[string]string{"prefer.rack": "true"},
	}
	const brokers = 6
	for b := range brokers {
		r.Brokers = append(r.Brokers, abi.Broker{ID: int32(b), Rack: fmt.Sprintf("az-%d", b%3)})
		r.ReplicaSets = append(r.ReplicaSets, []int32{int32(b), int32(b+1) % brokers, int32(b+2) % brokers})
	}
	all := make([]int32, benchTopics)
	for t := range benchTopics {
		all[t] = int32(t)
		ps := make([]abi.Partition, benchPartitions)
		for p := range ps {
			set := uint32((t + p) % brokers)
			ps[p] = abi.Partition{Leader: int32(set), Replicas: set, ISR: set}
		}
		r.Topics = append(r.Topics, abi.Topic{
			Name:           fmt.Sprintf("orders.region-%03d.v1", t),
			ID:             [16]byte{0: byte(t), 1: byte(t >> 8), 15: 1},
			Exists:         true,
			PartitionCount: benchPartitions,
			Partitions:     ps,
		})
	}
	for m := range benchMembers {
		owned := ownedOf(m)
		r.Members = append(r.Members, abi.Member{
			MemberID:        fmt.Sprintf("consumer-%04d-8c6f1d52-4e1b-4a8e-9d1c-%012d", m, m),
			ClientID:        "orders-service",
			ClientHost:      fmt.Sprintf("/10.0.%d.%d", m/256, m%256),
			Rack:            fmt.Sprintf("az-%d", m%3),
			Cooperative:     true,
			Topics:          all,
			OwnedGeneration: 9,
			Owned:           owned,
			Previous:        owned,
		})
	}
	return r
}

// ownedOf gives member m partition m of every topic.
func ownedOf(m int) []abi.TopicPartitions {
	ids := make([]int32, benchTopics)
	tps := make([]abi.TopicPartitions, benchTopics)
	for t := range tps {
		ids[t] = int32(m)
		tps[t] = abi.TopicPartitions{Topic: int32(t), Partitions: ids[t : t+1 : t+1]}
	}
	return tps
}

// benchResponse is the matching answer: every member keeps what it owns.
func benchResponse() *abi.Response {
	r := &abi.Response{}
	for m := range benchMembers {
		r.Members = append(r.Members, abi.MemberAssignment{Member: int32(m), Partitions: ownedOf(m)})
	}
	return r
}

func BenchmarkEncodeRequest(b *testing.B) {
	for _, c := range []struct {
		name string
		req  *abi.Request
	}{
		{"members=2000/partitions=1000000", benchRequest()},
		{"minimal", minimalRequest()},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := abi.AppendRequest(nil, c.req)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = abi.AppendRequest(buf[:0], c.req)
			}
		})
	}
}

func BenchmarkDecodeRequest(b *testing.B) {
	for _, c := range []struct {
		name string
		req  *abi.Request
	}{
		{"members=2000/partitions=1000000", benchRequest()},
		{"minimal", minimalRequest()},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := abi.AppendRequest(nil, c.req)
			if r, err := abi.DecodeRequest(buf); err != nil || len(r.Members) != len(c.req.Members) {
				b.Fatalf("decoding the benchmark request: %v", err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := abi.DecodeRequest(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	for _, c := range []struct {
		name string
		resp *abi.Response
	}{
		{"members=2000/partitions=1000000", benchResponse()},
		{"minimal", okResponse()},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := abi.AppendResponse(nil, c.resp)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = abi.AppendResponse(buf[:0], c.resp)
			}
		})
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	for _, c := range []struct {
		name string
		resp *abi.Response
	}{
		{"members=2000/partitions=1000000", benchResponse()},
		{"minimal", okResponse()},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := abi.AppendResponse(nil, c.resp)
			if r, err := abi.DecodeResponse(buf); err != nil || len(r.Members) != len(c.resp.Members) {
				b.Fatalf("decoding the benchmark response: %v", err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := abi.DecodeResponse(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
