package abi

import (
	"encoding/binary"
	"math"
	"sort"
)

// Flag bits of a topic entry.
const (
	topicExists    = 1 << 0
	topicPlacement = 1 << 1
)

// Flag bits of a member entry.
const memberCooperative = 1 << 0

// Flag bits of an assignor description.
const (
	assignorMayLeaveUnassigned = 1 << 0
	assignorGrouped            = 1 << 1
)

// Status byte of a response.
const (
	statusOK    = 0
	statusError = 1
)

// AppendRequest appends the encoding of r to dst and returns the result.
//
// Config keys are written in ascending order, so equal requests give equal
// bytes. A topic whose Partitions is not nil must have exactly PartitionCount
// entries; DecodeRequest rejects anything else.
//
// The request is written in the grouped layout exactly when r.TopicLists is
// not nil; entries that refer to topic lists need it.
func AppendRequest(dst []byte, r *Request) []byte {
	dst = grow(dst, requestSizeHint(r))
	dst = appendU32(dst, versionWord(r.TopicLists != nil))
	dst = appendString(dst, r.GroupID)
	dst = appendU32(dst, uint32(r.Generation))
	dst = appendString(dst, r.Protocol)
	dst = appendString(dst, r.Assignor)
	dst = append(dst, byte(r.RebalanceProtocol))
	dst = binary.LittleEndian.AppendUint64(dst, r.Seed)

	keys := make([]string, 0, len(r.Config))
	for k := range r.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	dst = appendU32(dst, uint32(len(keys)))
	for _, k := range keys {
		dst = appendString(dst, k)
		dst = appendString(dst, r.Config[k])
	}

	dst = appendU32(dst, uint32(len(r.Brokers)))
	for _, b := range r.Brokers {
		dst = appendU32(dst, uint32(b.ID))
		dst = appendString(dst, b.Rack)
	}

	dst = appendU32(dst, uint32(len(r.ReplicaSets)))
	for _, rs := range r.ReplicaSets {
		dst = appendInt32s(dst, rs)
	}

	dst = appendU32(dst, uint32(len(r.Topics)))
	for i := range r.Topics {
		t := &r.Topics[i]
		dst = appendString(dst, t.Name)
		dst = append(dst, t.ID[:]...)
		var flags byte
		if t.Exists {
			flags |= topicExists
		}
		if t.Partitions != nil {
			flags |= topicPlacement
		}
		dst = append(dst, flags)
		dst = appendU32(dst, uint32(t.PartitionCount))
		if t.Partitions != nil {
			dst = appendPlacement(dst, t.Partitions)
		}
	}
	var subs []int32 // each member's subscription list, in the grouped layout
	if r.TopicLists != nil {
		var extra [][]int32
		extra, subs = subscriptionLists(r)
		dst = appendU32(dst, uint32(len(r.TopicLists)+len(extra)))
		for _, l := range r.TopicLists {
			dst = appendInt32s(dst, l)
		}
		for _, l := range extra {
			dst = appendInt32s(dst, l)
		}
	}

	dst = appendU32(dst, uint32(len(r.Members)))
	for i := range r.Members {
		m := &r.Members[i]
		dst = appendString(dst, m.MemberID)
		dst = appendString(dst, m.InstanceID)
		dst = appendString(dst, m.ClientID)
		dst = appendString(dst, m.ClientHost)
		dst = appendString(dst, m.Rack)
		var flags byte
		if m.Cooperative {
			flags |= memberCooperative
		}
		dst = append(dst, flags)
		if subs != nil {
			dst = appendU32(dst, uint32(subs[i]))
		} else {
			dst = appendInt32s(dst, m.Topics)
		}
		dst = appendU32(dst, uint32(m.OwnedGeneration))
		dst = appendTopicPartitions(dst, m.Owned)
		dst = appendBytes(dst, m.UserData)
		dst = appendTopicPartitions(dst, m.Previous)
	}
	return dst
}

// AppendResponse appends the encoding of r to dst and returns the result. A
// response with a non-empty Error encodes only the error. A response is
// written in the grouped layout exactly when r.TopicLists is not nil.
func AppendResponse(dst []byte, r *Response) []byte {
	if r.Error != "" {
		dst = appendU32(dst, versionWord(r.TopicLists != nil))
		dst = append(dst, statusError)
		return appendString(dst, r.Error)
	}
	dst = appendU32(dst, versionWord(r.TopicLists != nil))
	dst = append(dst, statusOK)
	if r.TopicLists != nil {
		dst = appendTopicLists(dst, r.TopicLists)
	}
	dst = appendU32(dst, uint32(len(r.Members)))
	for i := range r.Members {
		m := &r.Members[i]
		dst = appendU32(dst, uint32(m.Member))
		dst = appendTopicPartitions(dst, m.Partitions)
		dst = appendBytes(dst, m.UserData)
	}
	return dst
}

// AppendDescription appends the encoding of d to dst and returns the result.
func AppendDescription(dst []byte, d *Description) []byte {
	dst = appendU32(dst, Version)
	dst = appendU32(dst, uint32(len(d.Assignors)))
	for _, a := range d.Assignors {
		dst = appendString(dst, a.Name)
		dst = appendString(dst, a.Version)
		dst = appendU32(dst, uint32(len(a.Protocols)))
		for _, p := range a.Protocols {
			dst = appendString(dst, p)
		}
		dst = append(dst, byte(a.Modes))
		var flags byte
		if a.MayLeaveUnassigned {
			flags |= assignorMayLeaveUnassigned
		}
		if a.Grouped {
			flags |= assignorGrouped
		}
		dst = append(dst, flags)
		dst = appendString(dst, a.Description)
	}
	return dst
}

// requestSizeHint estimates the encoded size of r so that encoding a large
// request grows dst once instead of doubling it twenty times.
func requestSizeHint(r *Request) int {
	n := 256 + 16*len(r.Config)
	for _, t := range r.Topics {
		n += 32 + len(t.Name) + 12*len(t.Partitions)
	}
	for _, l := range r.TopicLists {
		n += 4 + 4*len(l)
	}
	for i := range r.Members {
		m := &r.Members[i]
		n += 64 + len(m.MemberID) + len(m.InstanceID) + len(m.ClientID) + len(m.ClientHost) + len(m.Rack)
		n += 4*len(m.Topics) + len(m.UserData) + tpSize(m.Owned) + tpSize(m.Previous)
	}
	return n
}

// versionWord is the first u32 of a request or response buffer.
func versionWord(grouped bool) uint32 {
	if grouped {
		return Version | GroupedLayout
	}
	return Version
}

// subscriptionLists finds each member's subscribed topics in the topic-list
// table of r, in the grouped layout: the list that is the same slice, or
// else one with the same topics. Subscriptions in no list are returned in
// extra, in member order without repeats, to be written after the table,
// and refs holds each member's list index (-1 for no topics).
func subscriptionLists(r *Request) (extra [][]int32, refs []int32) {
	type sliceKey struct {
		p *int32
		n int
	}
	bySlice := make(map[sliceKey]int32, len(r.TopicLists))
	// byContent is built on the first miss: hosts usually send each
	// member's subscription as a slice of the table.
	var byContent map[[3]int32][]int32
	all := func(k int32) []int32 {
		if int(k) < len(r.TopicLists) {
			return r.TopicLists[k]
		}
		return extra[int(k)-len(r.TopicLists)]
	}
	for k, l := range r.TopicLists {
		if len(l) > 0 {
			bySlice[sliceKey{&l[0], len(l)}] = int32(k)
		}
	}
	refs = make([]int32, len(r.Members))
	for i := range r.Members {
		ts := r.Members[i].Topics
		if len(ts) == 0 {
			refs[i] = -1
			continue
		}
		key := sliceKey{&ts[0], len(ts)}
		if k, ok := bySlice[key]; ok {
			refs[i] = k
			continue
		}
		if byContent == nil {
			byContent = make(map[[3]int32][]int32)
			for k, l := range r.TopicLists {
				if len(l) > 0 {
					ck := [3]int32{l[0], l[len(l)-1], int32(len(l))}
					byContent[ck] = append(byContent[ck], int32(k))
				}
			}
		}
		ck := [3]int32{ts[0], ts[len(ts)-1], int32(len(ts))}
		found := int32(-1)
		for _, k := range byContent[ck] {
			if equalInt32s(all(k), ts) {
				found = k
				break
			}
		}
		if found < 0 {
			found = int32(len(r.TopicLists) + len(extra))
			extra = append(extra, ts)
			byContent[ck] = append(byContent[ck], found)
		}
		bySlice[key] = found
		refs[i] = found
	}
	return extra, refs
}

// appendTopicLists writes a topic-list table.
func appendTopicLists(dst []byte, lists [][]int32) []byte {
	dst = appendU32(dst, uint32(len(lists)))
	for _, l := range lists {
		dst = appendInt32s(dst, l)
	}
	return dst
}

func tpSize(tps []TopicPartitions) int {
	n := 4
	for _, tp := range tps {
		n += 8 + 4*len(tp.Partitions)
	}
	return n
}

func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	out := make([]byte, len(dst), len(dst)+n)
	copy(out, dst)
	return out
}

func appendU32(dst []byte, v uint32) []byte {
	return binary.LittleEndian.AppendUint32(dst, v)
}

func appendString(dst []byte, s string) []byte {
	dst = appendU32(dst, uint32(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = appendU32(dst, uint32(len(b)))
	return append(dst, b...)
}

// appendInt32s writes a count followed by the values. It writes into one
// resized slice rather than appending value by value, which matters at a
// million partitions.
func appendInt32s(dst []byte, vs []int32) []byte {
	dst = appendU32(dst, uint32(len(vs)))
	off := len(dst)
	dst = extend(dst, 4*len(vs))
	putInt32s(dst[off:], vs)
	return dst
}

func appendPlacement(dst []byte, ps []Partition) []byte {
	off := len(dst)
	dst = extend(dst, 12*len(ps))
	out := dst[off:]
	for i, p := range ps {
		o := out[12*i : 12*i+12]
		binary.LittleEndian.PutUint32(o[0:], uint32(p.Leader))
		binary.LittleEndian.PutUint32(o[4:], p.Replicas)
		binary.LittleEndian.PutUint32(o[8:], p.ISR)
	}
	return dst
}

// appendTopicPartitions writes a counted list of entries. A large group's
// lists are mostly one-partition entries (see reader.topicPartitions), so
// such entries are written inline, four at a time when they come in a row:
// in a wasm guest each call and each loop iteration costs an exit to the
// host's deadline check, and a response can hold a million entries.
func appendTopicPartitions(dst []byte, tps []TopicPartitions) []byte {
	dst = appendU32(dst, uint32(len(tps)))
	for i := 0; i < len(tps); {
		if q := tps[i:min(i+4, len(tps))]; len(q) == 4 &&
			len(q[0].Partitions) == 1 && len(q[1].Partitions) == 1 &&
			len(q[2].Partitions) == 1 && len(q[3].Partitions) == 1 {
			off := len(dst)
			dst = extend(dst, 48)
			// Written out rather than through a helper: the compiler does
			// not inline one of this size.
			o := dst[off : off+48 : off+48]
			le := binary.LittleEndian
			le.PutUint32(o[0:], uint32(q[0].Topic))
			le.PutUint32(o[4:], 1)
			le.PutUint32(o[8:], uint32(q[0].Partitions[0]))
			le.PutUint32(o[12:], uint32(q[1].Topic))
			le.PutUint32(o[16:], 1)
			le.PutUint32(o[20:], uint32(q[1].Partitions[0]))
			le.PutUint32(o[24:], uint32(q[2].Topic))
			le.PutUint32(o[28:], 1)
			le.PutUint32(o[32:], uint32(q[2].Partitions[0]))
			le.PutUint32(o[36:], uint32(q[3].Topic))
			le.PutUint32(o[40:], 1)
			le.PutUint32(o[44:], uint32(q[3].Partitions[0]))
			i += 4
			continue
		}
		tp := &tps[i]
		i++
		if len(tp.Partitions) == 1 {
			off := len(dst)
			dst = extend(dst, 12)
			o := dst[off : off+12 : off+12]
			binary.LittleEndian.PutUint32(o[0:], uint32(tp.Topic))
			binary.LittleEndian.PutUint32(o[4:], 1)
			binary.LittleEndian.PutUint32(o[8:], uint32(tp.Partitions[0]))
			continue
		}
		// Topic, count and values in one extension, the values copied as
		// bytes (one memory.copy) on little-endian machines.
		n := len(tp.Partitions)
		off := len(dst)
		dst = extend(dst, 8+4*n)
		o := dst[off:]
		binary.LittleEndian.PutUint32(o[0:], uint32(tp.Topic))
		binary.LittleEndian.PutUint32(o[4:], uint32(n))
		if nativeLittleEndian() {
			copy(o[8:], int32Bytes(tp.Partitions))
		} else {
			putInt32s(o[8:], tp.Partitions)
		}
	}
	return dst
}

// extend grows dst by n bytes whose contents the caller overwrites.
func extend(dst []byte, n int) []byte {
	if n > math.MaxInt32 {
		panic("abi: encoding larger than 2 GiB")
	}
	if cap(dst)-len(dst) < n {
		dst = grow(dst, n+len(dst)/2)
	}
	return dst[:len(dst)+n]
}
