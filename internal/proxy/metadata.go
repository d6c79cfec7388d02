package proxy

import (
	"encoding/binary"
	"errors"
	"slices"
)

// A Metadata response names brokers only in its broker list, which comes
// first (after the throttle time from v3). Everything after it, the topics
// and their partitions, is most of the response and needs no change, so
// the proxy rewrites the list and copies the rest as it came, instead of
// decoding and encoding every partition: for a cluster of 10,000
// partitions that is the difference between copying a few hundred
// kilobytes and building and encoding tens of thousands of structures for
// every client's Metadata request. Like every response the proxy only
// forwards, the part copied is not checked; the broker list is, in full.

// errMetadataShape is a Metadata broker list rewriteMetadataBrokers
// cannot read.
var errMetadataShape = errors.New("malformed metadata broker list")

// rewriteMetadataBrokers returns a Metadata response body of the given
// version with each broker's host and port replaced by the advertised ones,
// and brokers that cannot be advertised dropped, as rewriteAddresses does.
// A list it cannot read is errMetadataShape; the caller then decodes the
// whole response, which names the fault.
func rewriteMetadataBrokers(version int16, body []byte, adv advertiser, peers []Peer) ([]byte, error) {
	flexible := version >= 9
	w := walker{b: body}
	if version >= 3 {
		w.skip(4) // throttle time
	}
	head := len(body) - len(w.b)
	n := w.length(flexible, true)
	// A broker takes at least ten bytes: no count can exceed what is left.
	if n < 0 || n > len(w.b)/10 {
		w.bad = true
	}
	if w.bad {
		return nil, errMetadataShape
	}
	brokers := make([]byte, 0, len(body)-len(w.b)+16*n)
	kept := 0
	listed := make([]int32, 0, n)
	for range n {
		node := w.int32()
		host := w.str(flexible)
		port := w.int32()
		rest := w.b
		if version >= 1 {
			w.skip(max(w.length(flexible, false), 0)) // rack, perhaps null
		}
		if flexible {
			w.tags()
		}
		if w.bad {
			return nil, errMetadataShape
		}
		h, p, _ := adv(node, host, port)
		if h == "" {
			continue
		}
		kept++
		listed = append(listed, node)
		brokers = binary.BigEndian.AppendUint32(brokers, uint32(node))
		brokers = appendString(brokers, h, flexible)
		brokers = binary.BigEndian.AppendUint32(brokers, uint32(p))
		brokers = append(brokers, rest[:len(rest)-len(w.b)]...) // rack and tags
	}
	for _, pr := range peers {
		if slices.Contains(listed, pr.Node) {
			continue
		}
		kept++
		listed = append(listed, pr.Node)
		brokers = binary.BigEndian.AppendUint32(brokers, uint32(pr.Node))
		brokers = appendString(brokers, pr.Host, flexible)
		brokers = binary.BigEndian.AppendUint32(brokers, uint32(pr.Port))
		if version >= 1 { // no rack: a null string
			if flexible {
				brokers = append(brokers, 0)
			} else {
				brokers = binary.BigEndian.AppendUint16(brokers, 0xffff)
			}
		}
		if flexible {
			brokers = append(brokers, 0) // no tags
		}
	}
	out := make([]byte, 0, head+5+len(brokers)+len(w.b))
	out = append(out, body[:head]...)
	if flexible {
		out = binary.AppendUvarint(out, uint64(kept)+1)
	} else {
		out = binary.BigEndian.AppendUint32(out, uint32(kept))
	}
	out = append(out, brokers...)
	return append(out, w.b...), nil
}

// appendString appends s as a Kafka string: compact (length plus one, as a
// varint) in flexible versions, an int16 length before.
func appendString(b []byte, s string, flexible bool) []byte {
	if flexible {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}
