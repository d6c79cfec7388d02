package consumerproto

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// AssignmentVersion is the ConsumerProtocolAssignment version this package
// writes. Versions 0 to 3 carry the same fields, and every client reads
// version 0, so nothing is gained by writing a later one.
const AssignmentVersion = 0

// AssignmentEncoder writes ConsumerProtocolAssignment bytes for the members
// of one assignment request. It encodes each topic name once, however many
// members receive partitions of it.
type AssignmentEncoder struct {
	// headers[i] is topic i's name as a Kafka string.
	headers [][]byte
}

// NewAssignmentEncoder returns an encoder for a request whose topic table
// has the given names, in table order.
func NewAssignmentEncoder(topicNames []string) *AssignmentEncoder {
	e := &AssignmentEncoder{headers: make([][]byte, len(topicNames))}
	for i, name := range topicNames {
		h := make([]byte, 2, 2+len(name))
		binary.BigEndian.PutUint16(h, uint16(len(name)))
		e.headers[i] = append(h, name...)
	}
	return e
}

// Append appends one member's assignment to dst. Topics are written in
// topic-table order (by name when the table is sorted by name, as the
// request's is), entries for the same topic are merged, partitions are
// written ascending, and topics with no partitions are left out. parts is
// not modified. userData nil writes a null user data field.
//
// Topic indices must be within the table given to NewAssignmentEncoder;
// the host validates plugin output before encoding it.
func (e *AssignmentEncoder) Append(dst []byte, parts []abi.TopicPartitions, userData []byte) []byte {
	// One pass checks the order and sizes the output. Plugins return
	// entries in topic order, so the sort is the exception; a member of a
	// large group has hundreds of entries, so the check is a plain loop
	// rather than a comparison through a function value.
	size := 2 + 4 + 4 + len(userData)
	sorted := true
	for i := range parts {
		tp := &parts[i]
		size += len(e.headers[tp.Topic]) + 4 + 4*len(tp.Partitions)
		if i > 0 && tp.Topic < parts[i-1].Topic {
			sorted = false
		}
	}
	if !sorted {
		parts = slices.Clone(parts)
		slices.SortStableFunc(parts, byTopic)
	}
	dst = slices.Grow(dst, size)
	dst = binary.BigEndian.AppendUint16(dst, AssignmentVersion)
	countAt := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	topics := uint32(0)
	for i := 0; i < len(parts); {
		tp := &parts[i]
		if i+1 == len(parts) || parts[i+1].Topic != tp.Topic {
			// The usual case: the topic's only entry.
			i++
			switch len(tp.Partitions) {
			case 0:
				continue
			case 1:
				dst = append(dst, e.headers[tp.Topic]...)
				dst = binary.BigEndian.AppendUint32(dst, 1)
				dst = binary.BigEndian.AppendUint32(dst, uint32(tp.Partitions[0]))
			default:
				dst = append(dst, e.headers[tp.Topic]...)
				dst = appendPartitions(dst, parts[i-1:i], len(tp.Partitions))
			}
			topics++
			continue
		}
		j := i + 1
		n := len(tp.Partitions)
		for j < len(parts) && parts[j].Topic == tp.Topic {
			n += len(parts[j].Partitions)
			j++
		}
		if n > 0 {
			dst = append(dst, e.headers[tp.Topic]...)
			dst = appendPartitions(dst, parts[i:j], n)
			topics++
		}
		i = j
	}
	binary.BigEndian.PutUint32(dst[countAt:], topics)
	if userData == nil {
		return binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(userData)))
	return append(dst, userData...)
}

func byTopic(a, b abi.TopicPartitions) int { return cmp.Compare(a.Topic, b.Topic) }

// appendPartitions writes the n partitions of runs, which all name one
// topic, as one ascending int32 array.
func appendPartitions(dst []byte, runs []abi.TopicPartitions, n int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	start := len(dst)
	dst = dst[:start+4*n]
	written := dst[start:]
	k := 0
	ascending := true
	last := int32(-1 << 31)
	for _, r := range runs {
		for _, p := range r.Partitions {
			binary.BigEndian.PutUint32(written[k:], uint32(p))
			k += 4
			if p < last {
				ascending = false
			}
			last = p
		}
	}
	if !ascending {
		ps := make([]int32, 0, n)
		for _, r := range runs {
			ps = append(ps, r.Partitions...)
		}
		slices.Sort(ps)
		for k, p := range ps {
			binary.BigEndian.PutUint32(written[4*k:], uint32(p))
		}
	}
	return dst
}

// Assignment is a decoded ConsumerProtocolAssignment.
type Assignment struct {
	Version int16
	// Topics holds each assigned topic with its partitions, in the order
	// they were written.
	Topics []AssignedTopic
	// UserData is nil when the field is null. It aliases the decoded bytes.
	UserData []byte
}

// AssignedTopic is one topic of an [Assignment].
type AssignedTopic struct {
	Topic      string
	Partitions []int32
}

// DecodeAssignment decodes a ConsumerProtocolAssignment. Versions above 3
// are read as version 3. Like Kafka's clients, it rejects an empty input:
// an assignment is at least its version and topic count.
func DecodeAssignment(b []byte) (Assignment, error) {
	r := reader{b: b}
	var a Assignment
	a.Version = r.int16("version")
	if r.err == nil && a.Version < 0 {
		r.fail("version", errNegativeVersion(a.Version))
	}
	n := r.arrayLen("assigned partitions", 6)
	for range n {
		name := r.stringBytes("topic name")
		ps := r.int32s("partitions")
		if r.err != nil {
			break
		}
		a.Topics = append(a.Topics, AssignedTopic{Topic: string(name), Partitions: ps})
	}
	a.UserData = r.nullableBytes("user data")
	if r.err != nil {
		return Assignment{}, r.err
	}
	return a, nil
}
