package frame

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requests gives one request per shape that matters: flexible and not,
// ApiVersions (whose request header is flexible from v3), with tags.
func requests() []kmsg.Request {
	av0 := kmsg.NewPtrApiVersionsRequest()
	av0.Version = 0
	av3 := kmsg.NewPtrApiVersionsRequest()
	av3.Version = 3
	av3.ClientSoftwareName = "test"
	av3.ClientSoftwareVersion = "1.0"
	jg5 := kmsg.NewPtrJoinGroupRequest()
	jg5.Version = 5
	jg5.Group = "g"
	jg5.ProtocolType = "consumer"
	jg9 := kmsg.NewPtrJoinGroupRequest()
	jg9.Version = 9
	jg9.Group = "g"
	jg9.ProtocolType = "consumer"
	jg9.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1, 2, 3}}}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	return []kmsg.Request{av0, av3, jg5, jg9, md}
}

func TestParseRequestHeader_ReadsWhatKmsgWrites(t *testing.T) {
	for _, clientID := range []*string{nil, ptr(""), ptr("consumer-1")} {
		for _, req := range requests() {
			var opts []kmsg.RequestFormatterOpt
			if clientID != nil {
				opts = append(opts, kmsg.FormatterClientID(*clientID))
			}
			f := kmsg.NewRequestFormatter(opts...)
			wire := f.AppendRequest(nil, req, 77)
			fr, err := Read(bytes.NewReader(wire), nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			h, body, err := ParseRequestHeader(fr, req.IsFlexible())
			if err != nil {
				t.Fatalf("key %d v%d: %v", req.Key(), req.GetVersion(), err)
			}
			if h.Key != req.Key() || h.Version != req.GetVersion() || h.CorrelationID != 77 {
				t.Errorf("header %+v, want key %d v%d corr 77", h, req.Key(), req.GetVersion())
			}
			if (h.ClientID == nil) != (clientID == nil) || (clientID != nil && *h.ClientID != *clientID) {
				t.Errorf("client id %v, want %v", h.ClientID, clientID)
			}
			back := kmsg.RequestForKey(h.Key)
			back.SetVersion(h.Version)
			if err := back.ReadFrom(body); err != nil {
				t.Errorf("key %d v%d: body does not decode: %v", h.Key, h.Version, err)
			}
			// Writing the header back gives the same frame.
			again, at := AppendSize(nil)
			again = AppendRequestHeader(again, h)
			again = append(again, body...)
			FinishSize(again, at)
			if !bytes.Equal(again, wire) {
				t.Errorf("key %d v%d: rewritten frame differs", h.Key, h.Version)
			}
		}
	}
}

func ptr(s string) *string { return &s }

func TestParseRequestHeader_SkipsTaggedFields(t *testing.T) {
	h := RequestHeader{Key: int16(kmsg.Metadata), Version: 12, CorrelationID: 5, ClientID: ptr("c"), Flexible: true}
	b := AppendRequestHeader(nil, h)
	b = b[:len(b)-1]
	// Two tagged fields: tag 0 with 3 bytes, tag 200 (two-byte varint) with 1 byte.
	b = append(b, 2, 0, 3, 'x', 'y', 'z', 0xC8, 0x01, 1, 'q')
	b = append(b, 0xAB)
	got, body, err := ParseRequestHeader(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.CorrelationID != 5 || !bytes.Equal(body, []byte{0xAB}) {
		t.Errorf("header %+v body %x", got, body)
	}
}

func TestParseRequestHeader_RejectsMalformed(t *testing.T) {
	tests := []struct {
		name     string
		b        []byte
		flexible bool
	}{
		{"shorter than the fixed fields", []byte{0, 1, 0, 2, 0}, false},
		{"client id length missing", []byte{0, 1, 0, 2, 0, 0, 0, 9}, false},
		{"client id longer than the frame", []byte{0, 1, 0, 2, 0, 0, 0, 9, 0, 5, 'a'}, false},
		{"client id length below -1", []byte{0, 1, 0, 2, 0, 0, 0, 9, 0xFF, 0xFE}, false},
		{"tag section missing", []byte{0, 1, 0, 2, 0, 0, 0, 9, 0xFF, 0xFF}, true},
		{"tag larger than the frame", []byte{0, 1, 0, 2, 0, 0, 0, 9, 0xFF, 0xFF, 1, 0, 9}, true},
		{"varint too long", []byte{0, 1, 0, 2, 0, 0, 0, 9, 0xFF, 0xFF, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := ParseRequestHeader(tt.b, tt.flexible); !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestRead_Errors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"clean end between frames", nil, io.EOF},
		{"end inside the prefix", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"end inside the body", []byte{0, 0, 0, 4, 1, 2}, io.ErrUnexpectedEOF},
		{"size over the limit", []byte{0, 0x10, 0, 0}, ErrTooLarge},
		{"negative size", []byte{0x80, 0, 0, 0}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.in), nil, 1024)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestResponseHeader_RoundTrip(t *testing.T) {
	for _, flexible := range []bool{false, true} {
		b := AppendResponseHeader(nil, -42, flexible)
		b = append(b, 7)
		corr, body, err := ParseResponseHeader(b, flexible)
		if err != nil || corr != -42 || !bytes.Equal(body, []byte{7}) {
			t.Errorf("flexible %v: corr %d body %x err %v", flexible, corr, body, err)
		}
	}
}

// FuzzParseRequestHeader: no input panics, and an accepted header written
// back and parsed again gives the same header and body.
func FuzzParseRequestHeader(f *testing.F) {
	for _, req := range requests() {
		w := kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 1)
		f.Add(w[4:], req.IsFlexible())
	}
	f.Fuzz(func(t *testing.T, b []byte, flexible bool) {
		h, body, err := ParseRequestHeader(b, flexible)
		if err != nil {
			return
		}
		again := append(AppendRequestHeader(nil, h), body...)
		h2, body2, err := ParseRequestHeader(again, flexible)
		if err != nil || h2.Key != h.Key || h2.Version != h.Version || h2.CorrelationID != h.CorrelationID ||
			(h.ClientID == nil) != (h2.ClientID == nil) || !bytes.Equal(body, body2) {
			t.Fatalf("re-parse differs: %+v %x vs %+v %x (%v)", h, body, h2, body2, err)
		}
	})
}

// FuzzRead: no stream panics or returns a frame larger than the limit.
func FuzzRead(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 1, 2, 0, 0, 0, 0})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := Read(r, nil, 64)
			if err != nil {
				return
			}
			if len(fr) > 64 {
				t.Fatalf("frame of %d bytes over the limit", len(fr))
			}
		}
	})
}
