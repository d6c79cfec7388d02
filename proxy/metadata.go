package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/wasmassign/wasmassign/proxy/frame"
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

var errMetadataShape = errors.New("malformed metadata broker list")

// rewriteMetadataBrokers returns a Metadata response body of the given
// version with each broker's host and port replaced by the advertised ones,
// and brokers that cannot be advertised dropped, as rewriteAddresses does.
func rewriteMetadataBrokers(version int16, body []byte, adv advertiser) ([]byte, error) {
	flexible := version >= 9
	r := wireReader{b: body}
	if version >= 3 {
		r.skip(4) // throttle time
	}
	head := len(body) - len(r.b)
	n := r.arrayLen(flexible)
	// A broker takes at least ten bytes: no count can exceed what is left.
	if r.err == nil && n > len(r.b)/10 {
		r.err = fmt.Errorf("%w: %d brokers in %d bytes", errMetadataShape, n, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	brokers := make([]byte, 0, len(body)-len(r.b)+16*n)
	kept := 0
	for range n {
		node := r.int32()
		host := r.string(flexible)
		port := r.int32()
		rest := r.b
		if version >= 1 {
			r.nullableString(flexible) // rack
		}
		if flexible {
			r.tags()
		}
		if r.err != nil {
			return nil, r.err
		}
		h, p, _ := adv(node, host, port)
		if h == "" {
			continue
		}
		kept++
		brokers = binary.BigEndian.AppendUint32(brokers, uint32(node))
		brokers = appendString(brokers, h, flexible)
		brokers = binary.BigEndian.AppendUint32(brokers, uint32(p))
		brokers = append(brokers, rest[:len(rest)-len(r.b)]...) // rack and tags
	}
	out := make([]byte, 0, head+5+len(brokers)+len(r.b))
	out = append(out, body[:head]...)
	if flexible {
		out = binary.AppendUvarint(out, uint64(kept)+1)
	} else {
		out = binary.BigEndian.AppendUint32(out, uint32(kept))
	}
	out = append(out, brokers...)
	return append(out, r.b...), nil
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

// wireReader reads Kafka wire fields; after the first error every read
// returns a zero value and err keeps that error.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", errMetadataShape, what)
	}
}

func (r *wireReader) skip(n int) {
	if r.err != nil {
		return
	}
	if n < 0 || n > len(r.b) {
		r.fail("field")
		return
	}
	r.b = r.b[n:]
}

func (r *wireReader) int32() int32 {
	if r.err != nil || len(r.b) < 4 {
		r.fail("int32")
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

// length reads a string or array length; null (-1, or 0 when compact)
// reads as -1.
func (r *wireReader) length(flexible, wide bool) int {
	if r.err != nil {
		return 0
	}
	if flexible {
		v, n := binary.Uvarint(r.b)
		if n <= 0 || v > uint64(len(r.b)-n)+1 {
			r.fail("length")
			return 0
		}
		r.b = r.b[n:]
		return int(v) - 1
	}
	if wide {
		return int(r.int32())
	}
	if len(r.b) < 2 {
		r.fail("length")
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return int(v)
}

// arrayLen reads the length of an array that must not be null.
func (r *wireReader) arrayLen(flexible bool) int {
	n := r.length(flexible, true)
	if n < 0 && r.err == nil {
		r.err = fmt.Errorf("%w: null broker list", errMetadataShape)
	}
	return n
}

// string reads a string that must not be null.
func (r *wireReader) string(flexible bool) string {
	n := r.length(flexible, false)
	if n < 0 && r.err == nil {
		r.err = fmt.Errorf("%w: null host", errMetadataShape)
	}
	if r.err != nil || n > len(r.b) {
		r.fail("string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// nullableString skips a string that may be null.
func (r *wireReader) nullableString(flexible bool) {
	if n := r.length(flexible, false); n > 0 {
		r.skip(n)
	}
}

func (r *wireReader) tags() {
	if r.err != nil {
		return
	}
	rest, err := frame.SkipTags(r.b)
	if err != nil {
		r.err = fmt.Errorf("%w: %w", errMetadataShape, err)
		return
	}
	r.b = rest
}
