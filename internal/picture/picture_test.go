package picture

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// randomGroup builds a request with three racked brokers, placement for
// some topics, members with and without racks, and a round-robin
// assignment of every partition.
func randomGroup(rng *rand.Rand) (*abi.Request, *abi.Response) {
	req := &abi.Request{
		Brokers:     []abi.Broker{{ID: 0, Rack: "a"}, {ID: 1, Rack: "b"}, {ID: 2, Rack: "c"}, {ID: 3}},
		ReplicaSets: [][]int32{{0}, {1, 2}, {3}, {0, 1, 2}},
	}
	for t := range 1 + rng.IntN(4) {
		topic := abi.Topic{Name: fmt.Sprintf("t<%d>", t), Exists: true, PartitionCount: int32(1 + rng.IntN(12))}
		if rng.IntN(3) > 0 {
			for range topic.PartitionCount {
				s := uint32(rng.IntN(len(req.ReplicaSets)))
				topic.Partitions = append(topic.Partitions, abi.Partition{Leader: req.ReplicaSets[s][0], Replicas: s, ISR: s})
			}
		}
		req.Topics = append(req.Topics, topic)
	}
	racks := []string{"", "a", "b", "c", "z"}
	for m := range 1 + rng.IntN(6) {
		req.Members = append(req.Members, abi.Member{MemberID: fmt.Sprintf("m&%d\"", m), Rack: racks[rng.IntN(len(racks))]})
	}
	resp := &abi.Response{Members: make([]abi.MemberAssignment, len(req.Members))}
	for i := range resp.Members {
		resp.Members[i].Member = int32(i)
	}
	k := 0
	for t, topic := range req.Topics {
		for p := range topic.PartitionCount {
			ma := &resp.Members[k%len(req.Members)]
			ma.Partitions = append(ma.Partitions, abi.TopicPartitions{Topic: int32(t), Partitions: []int32{p}})
			k++
		}
	}
	return req, resp
}

// expectedLocality reads the rack rule straight from the request.
func expectedLocality(req *abi.Request, m int, topic string, p int32) string {
	rack := req.Members[m].Rack
	var t *abi.Topic
	for i := range req.Topics {
		if req.Topics[i].Name == topic {
			t = &req.Topics[i]
		}
	}
	if rack == "" || t.Partitions == nil {
		return "unknown"
	}
	known := false
	for _, b := range req.ReplicaSets[t.Partitions[p].Replicas] {
		for _, br := range req.Brokers {
			if br.ID == b && br.Rack != "" {
				known = true
				if br.Rack == rack {
					return "local"
				}
			}
		}
	}
	if !known {
		return "unknown"
	}
	return "remote"
}

type svgDoc struct {
	Groups []struct {
		Member string `xml:"data-member,attr"`
		Rects  []struct {
			Class string `xml:"class,attr"`
			Title string `xml:"title"`
		} `xml:"rect"`
	} `xml:"g"`
}

func TestWriteSVG_OneWellFormedCellPerPartitionColouredByRack(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for i := range 200 {
		req, resp := randomGroup(rng)
		var buf bytes.Buffer
		if err := WriteSVG(&buf, req, resp, Options{Title: "group <g> & co"}); err != nil {
			t.Fatal(err)
		}
		var doc svgDoc
		if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
			t.Fatalf("case %d: not well-formed XML: %v\n%s", i, err, buf.String())
		}
		if len(doc.Groups) != len(req.Members) {
			t.Fatalf("case %d: %d member rows, want %d", i, len(doc.Groups), len(req.Members))
		}
		cells, want := 0, 0
		for _, topic := range req.Topics {
			want += int(topic.PartitionCount)
		}
		for m, g := range doc.Groups {
			if g.Member != req.Members[m].MemberID {
				t.Errorf("row %d is %q, want %q", m, g.Member, req.Members[m].MemberID)
			}
			for _, r := range g.Rects {
				cells++
				cut := strings.LastIndex(r.Title, "-")
				var p int32
				fmt.Sscan(r.Title[cut+1:], &p)
				if got, want := r.Class, expectedLocality(req, m, r.Title[:cut], p); got != want {
					t.Errorf("case %d: member %d cell %s is %s, want %s", i, m, r.Title, got, want)
				}
			}
		}
		if cells != want {
			t.Errorf("case %d: %d cells, want one per partition (%d)", i, cells, want)
		}
	}
}

func TestWriteSVG_DrawsWithheldPartitionsAsOutlines(t *testing.T) {
	req, target := randomGroup(rand.New(rand.NewPCG(1, 1)))
	// The drawn assignment withholds every partition of the first member.
	assignment := &abi.Response{Members: slices.Clone(target.Members)}
	assignment.Members[0].Partitions = nil
	withheld := 0
	for _, tp := range target.Members[0].Partitions {
		withheld += len(tp.Partitions)
	}
	var buf bytes.Buffer
	if err := WriteSVG(&buf, req, assignment, Options{Target: target}); err != nil {
		t.Fatal(err)
	}
	var doc svgDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	got := 0
	for m, g := range doc.Groups {
		for _, r := range g.Rects {
			if r.Class == "withheld" {
				got++
				if m != 0 {
					t.Errorf("member %d has a withheld cell", m)
				}
			}
		}
	}
	if got != withheld || withheld == 0 {
		t.Errorf("%d withheld cells, want %d", got, withheld)
	}
}

func TestWriteSVG_RefusesHugeAndInvalidInput(t *testing.T) {
	req, resp := randomGroup(rand.New(rand.NewPCG(2, 2)))
	if err := WriteSVG(&bytes.Buffer{}, req, resp, Options{MaxCells: 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want ErrTooLarge", err)
	}
	bad := &abi.Response{Members: []abi.MemberAssignment{{Member: 99}}}
	if err := WriteSVG(&bytes.Buffer{}, req, bad, Options{}); err == nil || !strings.Contains(err.Error(), "member index 99") {
		t.Errorf("err = %v, want a member index error", err)
	}
}
