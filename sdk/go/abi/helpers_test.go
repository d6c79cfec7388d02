package abi_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// le builds a buffer field by field straight from the table in sdk/ABI.md
// section 2. It shares no code with encode.go, so a test that compares the
// codec's bytes with an le buffer checks the codec against the spec rather
// than against itself.
type le []byte

func (b le) u8(v byte) le    { return append(b, v) }
func (b le) u32(v uint32) le { return binary.LittleEndian.AppendUint32(b, v) }
func (b le) i32(v int32) le  { return b.u32(uint32(v)) }
func (b le) u64(v uint64) le { return binary.LittleEndian.AppendUint64(b, v) }
func (b le) raw(v ...byte) le {
	return append(b, v...)
}
func (b le) str(s string) le { return append(b.u32(uint32(len(s))), s...) }
func (b le) bytes(v []byte) le {
	return append(b.u32(uint32(len(v))), v...)
}
func (b le) i32s(vs ...int32) le {
	b = b.u32(uint32(len(vs)))
	for _, v := range vs {
		b = b.i32(v)
	}
	return b
}

// canonicalRequest returns a deep copy of r in the form DecodeRequest
// produces: empty lists, byte strings and the config map become nil. A
// topic's Partitions keeps the difference between nil (no placement) and
// empty (placement of zero partitions), because the flags byte carries it.
func canonicalRequest(r *abi.Request) *abi.Request {
	c := *r
	c.Config = nil
	if len(r.Config) > 0 {
		c.Config = make(map[string]string, len(r.Config))
		for k, v := range r.Config {
			c.Config[k] = v
		}
	}
	c.Brokers = nilIfEmpty(slices.Clone(r.Brokers))
	c.ReplicaSets = nil
	for _, rs := range r.ReplicaSets {
		c.ReplicaSets = append(c.ReplicaSets, nilIfEmpty(slices.Clone(rs)))
	}
	c.Topics = nil
	for _, t := range r.Topics {
		if t.Partitions != nil {
			t.Partitions = append([]abi.Partition{}, t.Partitions...)
		}
		c.Topics = append(c.Topics, t)
	}
	c.Members = nil
	for _, m := range r.Members {
		m.Topics = nilIfEmpty(slices.Clone(m.Topics))
		m.Owned = canonicalTPs(m.Owned)
		m.UserData = nilIfEmpty(slices.Clone(m.UserData))
		m.Previous = canonicalTPs(m.Previous)
		c.Members = append(c.Members, m)
	}
	c.TopicLists = canonicalLists(r.TopicLists)
	if c.TopicLists != nil {
		// The grouped layout sends each subscription as a reference to
		// the table; one that is in no list is added after the others.
		for _, m := range c.Members {
			if len(m.Topics) == 0 || slices.ContainsFunc(c.TopicLists, func(l []int32) bool { return slices.Equal(l, m.Topics) }) {
				continue
			}
			c.TopicLists = append(c.TopicLists, slices.Clone(m.Topics))
		}
	}
	return &c
}

// canonicalLists copies a topic-list table, keeping nil (the plain layout)
// apart from empty (the grouped layout with no lists).
func canonicalLists(ls [][]int32) [][]int32 {
	if ls == nil {
		return nil
	}
	out := [][]int32{}
	for _, l := range ls {
		out = append(out, slices.Clone(l))
	}
	return out
}

// canonicalResponse is canonicalRequest for responses. An error response
// carries only its message on the wire, so its assignments are dropped.
func canonicalResponse(r *abi.Response) *abi.Response {
	if r.Error != "" {
		c := &abi.Response{Error: r.Error}
		if r.TopicLists != nil {
			c.TopicLists = [][]int32{}
		}
		return c
	}
	c := &abi.Response{TopicLists: canonicalLists(r.TopicLists)}
	for _, m := range r.Members {
		m.Partitions = canonicalTPs(m.Partitions)
		m.UserData = nilIfEmpty(slices.Clone(m.UserData))
		c.Members = append(c.Members, m)
	}
	return c
}

// canonicalDescription is canonicalRequest for descriptions.
func canonicalDescription(d *abi.Description) *abi.Description {
	c := &abi.Description{}
	for _, a := range d.Assignors {
		a.Protocols = nilIfEmpty(slices.Clone(a.Protocols))
		c.Assignors = append(c.Assignors, a)
	}
	return c
}

func canonicalTPs(tps []abi.TopicPartitions) []abi.TopicPartitions {
	var out []abi.TopicPartitions
	for _, tp := range tps {
		out = append(out, abi.TopicPartitions{Topic: tp.Topic, Partitions: nilIfEmpty(slices.Clone(tp.Partitions))})
	}
	return out
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// gen generates random valid values. Sizes stay small so that a few hundred
// iterations run in milliseconds; the shapes still reach every branch of the
// layout: absent and present optional parts, empty and non-empty lists given
// as both nil and empty slices, non-ASCII text and extreme integers.
type gen struct{ rng *rand.Rand }

func newGen(seed uint64) gen { return gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g gen) chance(oneIn int) bool { return g.rng.IntN(oneIn) == 0 }

func (g gen) str() string {
	texts := [...]string{"", "a", "range", "group-1", "rack-é", "λ", "🙂 topic", "with\x00nul", "cooperative-sticky"}
	if g.chance(20) {
		b := make([]byte, 200+g.rng.IntN(200))
		for i := range b {
			b[i] = 'a' + byte(g.rng.IntN(26))
		}
		return string(b)
	}
	return texts[g.rng.IntN(len(texts))]
}

// int32 favours the values where sign and width mistakes show.
func (g gen) int32() int32 {
	switch g.rng.IntN(6) {
	case 0:
		return -1
	case 1:
		return [...]int32{0, 1, -2147483648, 2147483647}[g.rng.IntN(4)]
	default:
		return int32(g.rng.Uint32())
	}
}

func (g gen) int32s(maxLen int) []int32 {
	n := g.rng.IntN(maxLen + 1)
	if n == 0 {
		if g.chance(2) {
			return []int32{}
		}
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = g.int32()
	}
	return out
}

func (g gen) bytes() []byte {
	n := g.rng.IntN(12)
	if n == 0 {
		if g.chance(2) {
			return []byte{}
		}
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.Uint32())
	}
	return b
}

// tps returns topic-partition sets whose topic indices are below nTopics. The
// partition ids are arbitrary: a member may report anything as owned.
func (g gen) tps(nTopics int) []abi.TopicPartitions {
	return g.groupedTPs(nTopics, 0)
}

// groupedTPs is tps with entries that may also refer to the first nLists
// topic lists.
func (g gen) groupedTPs(nTopics, nLists int) []abi.TopicPartitions {
	if nTopics == 0 {
		return nil
	}
	n := g.rng.IntN(4)
	if n == 0 && g.chance(2) {
		return []abi.TopicPartitions{}
	}
	var out []abi.TopicPartitions
	for range n {
		topic := int32(g.rng.IntN(nTopics))
		if nLists > 0 && g.chance(2) {
			topic = abi.ListRef(g.rng.IntN(nLists))
		}
		out = append(out, abi.TopicPartitions{Topic: topic, Partitions: g.int32s(6)})
	}
	return out
}

// topicLists returns a topic-list table of up to four lists over topic
// indices below nTopics (nTopics must be positive), never nil.
func (g gen) topicLists(nTopics int) [][]int32 {
	lists := [][]int32{}
	for range g.rng.IntN(4) {
		var l []int32
		for t := range nTopics {
			if g.chance(2) {
				l = append(l, int32(t))
			}
		}
		if len(l) == 0 {
			l = []int32{int32(g.rng.IntN(nTopics))}
		}
		lists = append(lists, l)
	}
	return lists
}

func (g gen) request() *abi.Request {
	r := &abi.Request{
		GroupID:           g.str(),
		Generation:        g.int32(),
		Protocol:          g.str(),
		Assignor:          g.str(),
		RebalanceProtocol: abi.RebalanceProtocol(g.rng.IntN(2)),
		Seed:              g.rng.Uint64(),
	}
	if n := g.rng.IntN(5); n > 0 || g.chance(2) {
		r.Config = map[string]string{}
		for range n {
			r.Config[g.str()+g.str()] = g.str()
		}
	}
	for range g.rng.IntN(5) {
		r.Brokers = append(r.Brokers, abi.Broker{ID: g.int32(), Rack: g.str()})
	}
	for range g.rng.IntN(4) {
		r.ReplicaSets = append(r.ReplicaSets, g.int32s(4))
	}
	for i := range g.rng.IntN(6) {
		// Topic names are unique in the table; a numeric suffix keeps the
		// random ones apart.
		t := abi.Topic{Name: fmt.Sprintf("%s#%d", g.str(), i), Exists: !g.chance(4)}
		if g.chance(2) {
			for i := range t.ID {
				t.ID[i] = byte(g.rng.Uint32())
			}
		}
		if t.Exists {
			t.PartitionCount = int32(g.rng.IntN(6))
			if g.chance(10) {
				// A topic that exists without placement may claim any
				// non-negative count; nothing is allocated for it.
				t.PartitionCount = 2147483647
			} else if len(r.ReplicaSets) > 0 && g.chance(2) {
				t.Partitions = make([]abi.Partition, t.PartitionCount)
				for i := range t.Partitions {
					t.Partitions[i] = abi.Partition{
						Leader:   g.int32(),
						Replicas: uint32(g.rng.IntN(len(r.ReplicaSets))),
						ISR:      uint32(g.rng.IntN(len(r.ReplicaSets))),
					}
				}
			}
		}
		r.Topics = append(r.Topics, t)
	}
	if len(r.Topics) > 0 && g.chance(3) {
		r.TopicLists = g.topicLists(len(r.Topics))
	}
	for range g.rng.IntN(5) {
		m := abi.Member{
			MemberID:        g.str(),
			InstanceID:      g.str(),
			ClientID:        g.str(),
			ClientHost:      g.str(),
			Rack:            g.str(),
			Cooperative:     g.chance(2),
			OwnedGeneration: g.int32(),
			Owned:           g.groupedTPs(len(r.Topics), len(r.TopicLists)),
			UserData:        g.bytes(),
			Previous:        g.groupedTPs(len(r.Topics), len(r.TopicLists)),
		}
		for i := range r.Topics {
			if g.chance(2) {
				m.Topics = append(m.Topics, int32(i))
			}
		}
		r.Members = append(r.Members, m)
	}
	return r
}

func (g gen) response() *abi.Response {
	if g.chance(5) {
		r := &abi.Response{Error: g.str() + "x"}
		if g.chance(2) {
			r.TopicLists = [][]int32{}
		}
		if g.chance(2) {
			// Ignored on the wire: an error response carries only its message.
			r.Members = []abi.MemberAssignment{{Member: 1}}
		}
		return r
	}
	r := &abi.Response{}
	if g.chance(3) {
		r.TopicLists = g.topicLists(1 + g.rng.IntN(8))
	}
	for range g.rng.IntN(5) {
		m := abi.MemberAssignment{
			Member:     g.int32(),
			Partitions: g.groupedTPs(1+g.rng.IntN(8), len(r.TopicLists)),
			UserData:   g.bytes(),
		}
		if len(m.Partitions) > 0 && r.TopicLists == nil && g.chance(4) {
			// A response is decoded without its request, so any topic
			// index must survive the trip for the host to reject it.
			m.Partitions[0].Topic = g.int32()
		}
		r.Members = append(r.Members, m)
	}
	return r
}

func (g gen) description() *abi.Description {
	d := &abi.Description{}
	for range g.rng.IntN(4) {
		a := abi.AssignorInfo{
			Name:               g.str(),
			Version:            g.str(),
			Modes:              abi.Modes(g.rng.IntN(4)),
			MayLeaveUnassigned: g.chance(2),
			Grouped:            g.chance(2),
			Description:        g.str(),
		}
		for range g.rng.IntN(4) {
			a.Protocols = append(a.Protocols, g.str())
		}
		d.Assignors = append(d.Assignors, a)
	}
	return d
}
