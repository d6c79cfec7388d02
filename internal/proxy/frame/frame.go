// Package frame reads and writes the framing of the Kafka wire protocol: the
// 4-byte size prefix, the request header (versions 1 and 2) and the response
// header (versions 0 and 1). It leaves request and response bodies as bytes,
// so a proxy can forward what it does not need to understand byte for byte,
// and decode with kmsg only what it does.
//
// Everything here reads bytes from the network, so every reader bounds what
// it allocates by what it has been given, and every failure is an error
// naming the field, never a panic. The package must not import anything
// above it (coordinator, runtime, proxy).
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is returned, wrapped, for a frame whose size prefix is above
// the reader's limit. The connection cannot be resynchronised after it and
// must be closed.
var ErrTooLarge = errors.New("frame too large")

// ErrMalformed is returned, wrapped with the field, for a header that cannot
// be parsed.
var ErrMalformed = errors.New("malformed frame")

// Read reads one size-prefixed frame from r into buf (grown as needed) and
// returns the frame's bytes without the prefix. A size above max, or
// negative, is ErrTooLarge or ErrMalformed; a stream that ends inside a
// frame is io.ErrUnexpectedEOF, and one that ends between frames io.EOF.
func Read(r io.Reader, buf []byte, max int32) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	size, err := Size(prefix, max)
	if err != nil {
		return nil, err
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// Size returns the size a frame's prefix gives: ErrMalformed when it is
// negative, ErrTooLarge when it is above max, as for Read.
func Size(prefix [4]byte, max int32) (int32, error) {
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	switch {
	case size < 0:
		return 0, fmt.Errorf("%w: negative size %d", ErrMalformed, size)
	case size > max:
		return 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, size, max)
	}
	return size, nil
}

// AppendSize reserves the 4-byte size prefix at the end of dst. Call
// [FinishSize] with the returned offset once the frame is complete.
func AppendSize(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// FinishSize writes the size of the frame that starts at offset at (as
// returned by [AppendSize]) into its prefix.
func FinishSize(frame []byte, at int) {
	binary.BigEndian.PutUint32(frame[at:], uint32(len(frame)-at-4))
}

// RequestHeader is a parsed request header.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is nil when the client sent a null client id.
	ClientID *string
	// Flexible records whether the header had a tagged-field section
	// (request header v2).
	Flexible bool
}

// ParseRequestHeader parses the header at the start of a request frame.
// flexible reports whether this key and version use request header v2,
// which the caller knows from kmsg (ApiVersions from version 3 does too);
// a key the caller does not know should be parsed with flexible false,
// which reads the key, version and correlation id every header starts with.
// It returns the header and the body that follows it.
func ParseRequestHeader(frame []byte, flexible bool) (RequestHeader, []byte, error) {
	var h RequestHeader
	if len(frame) < 8 {
		return h, nil, fmt.Errorf("%w: request header: %d bytes, need at least 8", ErrMalformed, len(frame))
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[8:]
	if len(rest) < 2 {
		return h, nil, fmt.Errorf("%w: request header: client id length missing", ErrMalformed)
	}
	n := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if n >= 0 {
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("%w: request header: client id of %d bytes, %d left", ErrMalformed, n, len(rest))
		}
		id := string(rest[:n])
		h.ClientID = &id
		rest = rest[n:]
	} else if n != -1 {
		return h, nil, fmt.Errorf("%w: request header: client id length %d", ErrMalformed, n)
	}
	if flexible {
		h.Flexible = true
		var err error
		if rest, err = SkipTags(rest); err != nil {
			return h, nil, fmt.Errorf("%w: request header: %v", ErrMalformed, err)
		}
	}
	return h, rest, nil
}

// AppendRequestHeader appends h in request header v1, or v2 when h.Flexible
// (with an empty tagged-field section).
func AppendRequestHeader(dst []byte, h RequestHeader) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if h.ClientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xFFFF)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*h.ClientID)))
		dst = append(dst, *h.ClientID...)
	}
	if h.Flexible {
		dst = append(dst, 0)
	}
	return dst
}

// ParseResponseHeader parses a response header: the correlation id, then,
// when flexible (response header v1), a tagged-field section. ApiVersions
// responses never use v1, whatever their version.
func ParseResponseHeader(frame []byte, flexible bool) (correlationID int32, body []byte, err error) {
	if len(frame) < 4 {
		return 0, nil, fmt.Errorf("%w: response header: %d bytes, need at least 4", ErrMalformed, len(frame))
	}
	correlationID = int32(binary.BigEndian.Uint32(frame))
	body = frame[4:]
	if flexible {
		if body, err = SkipTags(body); err != nil {
			return 0, nil, fmt.Errorf("%w: response header: %v", ErrMalformed, err)
		}
	}
	return correlationID, body, nil
}

// AppendResponseHeader appends a response header for correlationID, v1
// (with an empty tagged-field section) when flexible.
func AppendResponseHeader(dst []byte, correlationID int32, flexible bool) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

// SkipTags skips a tagged-field section: an unsigned varint count, then per
// field an unsigned varint tag, an unsigned varint size and that many bytes.
func SkipTags(b []byte) ([]byte, error) {
	n, b, err := uvarint(b, "tag count")
	if err != nil {
		return nil, err
	}
	for i := uint64(0); i < n; i++ {
		if _, b, err = uvarint(b, "tag"); err != nil {
			return nil, err
		}
		var size uint64
		if size, b, err = uvarint(b, "tag size"); err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, fmt.Errorf("tagged field of %d bytes, %d left", size, len(b))
		}
		b = b[size:]
	}
	return b, nil
}

// uvarint reads a Kafka unsigned varint, at most 5 bytes (a uint32).
func uvarint(b []byte, what string) (uint64, []byte, error) {
	var v uint64
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, nil, fmt.Errorf("%s: truncated varint", what)
		}
		c := b[i]
		v |= uint64(c&0x7F) << (7 * i)
		if c < 0x80 {
			return v, b[i+1:], nil
		}
	}
	return 0, nil, fmt.Errorf("%s: varint longer than 5 bytes", what)
}
