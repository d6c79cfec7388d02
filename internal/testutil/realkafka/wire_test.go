package realkafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn sends requests at exactly the version a test names. kgo picks
// versions itself and rewrites some requests (it splits OffsetFetch by
// group), so a per-version fact needs its own wire peer.
type rawConn struct {
	conn net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{conn: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("realkafka-facts"))}
}

// do sends req at version v and decodes the response.
func (r *rawConn) do(ctx context.Context, req kmsg.Request, v int16) (kmsg.Response, error) {
	req.SetVersion(v)
	r.corr++
	if d, ok := ctx.Deadline(); ok {
		r.conn.SetDeadline(d)
	} else {
		r.conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	if _, err := r.conn.Write(r.fmt.AppendRequest(nil, req, r.corr)); err != nil {
		return nil, fmt.Errorf("write %s v%d: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		return nil, fmt.Errorf("read %s v%d response size: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return nil, fmt.Errorf("read %s v%d response: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != r.corr {
		return nil, fmt.Errorf("%s v%d: response for another correlation id", kmsg.NameForKey(req.Key()), v)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(v)
	// Flexible responses carry a tag section in their header, except
	// ApiVersions, whose header never changes so old clients can read it.
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	return resp, nil
}

// skipTags drops a tagged-field section: a count, then key, size, bytes.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, fmt.Errorf("bad tag count")
	}
	b = b[l:]
	for i := uint64(0); i < n; i++ {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, fmt.Errorf("bad tag key")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, fmt.Errorf("bad tag size")
		}
		b = b[l+int(size):]
	}
	return b, nil
}
