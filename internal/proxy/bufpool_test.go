package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// TestConnReader_ReadsAsBufioDoes runs random sequences of reads through a
// connReader and a bufio.Reader of the same size over the same bytes, from
// sources that hand them out whole, one at a time or half at a time, and
// requires the same answers: whatever buffer a connReader reads into, the
// bytes come out in order, none lost or repeated.
func TestConnReader_ReadsAsBufioDoes(t *testing.T) {
	data := make([]byte, 200_000)
	for i := range data {
		data[i] = byte(i * 31 / 7)
	}
	sources := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+err": iotest.DataErrReader,
	}
	for name, wrap := range sources {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 1))
				var pool bufPool
				got := newConnReader(wrap(bytes.NewReader(data)), &pool)
				want := bufio.NewReaderSize(wrap(bytes.NewReader(data)), bufSize)
				for step := 0; ; step++ {
					var n int
					switch rng.IntN(10) {
					case 0, 1: // a small frame's prefix, or a whole small frame
						n = rng.IntN(smallReadBuf + 1)
					case 2: // a frame up to the large buffer
						n = rng.IntN(bufSize + 1)
					default:
						n = rng.IntN(64)
					}
					var g, w []byte
					var gerr, werr error
					op := rng.IntN(5)
					switch op {
					case 0:
						g, gerr = got.Peek(n)
						w, werr = want.Peek(n)
						g, w = bytes.Clone(g), bytes.Clone(w)
					case 1:
						var gn, wn int
						gn, gerr = got.Discard(n)
						wn, werr = want.Discard(n)
						g, w = []byte{byte(gn), byte(gn >> 8)}, []byte{byte(wn), byte(wn >> 8)}
					case 2:
						// Larger reads than the buffer go straight to
						// the source in both.
						size := n
						if rng.IntN(4) == 0 {
							size = bufSize + rng.IntN(bufSize)
						}
						gb, wb := make([]byte, size), make([]byte, size)
						var gn, wn int
						gn, gerr = io.ReadFull(got, gb)
						wn, werr = io.ReadFull(want, wb)
						g, w = gb[:gn], wb[:wn]
					case 3:
						var gc, wc byte
						gc, gerr = got.ReadByte()
						wc, werr = want.ReadByte()
						g, w = []byte{gc}, []byte{wc}
					case 4:
						got.shrink()
						if got.Buffered() == 0 && got.large != nil {
							t.Fatalf("step %d: an empty reader kept its large buffer after shrink", step)
						}
						continue
					}
					if errors.Is(werr, bufio.ErrBufferFull) {
						continue // bufio's buffer boundary, not the data's
					}
					if !bytes.Equal(g, w) || (gerr == nil) != (werr == nil) {
						t.Fatalf("step %d op %d n %d: got %d bytes, %v; bufio %d bytes, %v", step, op, n, len(g), gerr, len(w), werr)
					}
					if werr != nil {
						return // the data is consumed
					}
				}
			})
		}
	}
}

func TestConnReader_IsAReader(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 5000)
	var pool bufPool
	if err := iotest.TestReader(newConnReader(bytes.NewReader(data), &pool), data); err != nil {
		t.Fatal(err)
	}
}

// TestConnReader_BorrowsOnlyForMoreThanTheSmallBuffer: a small frame is
// read in the connection's own buffer; a large one, or a peer that keeps
// the small buffer full, borrows a large buffer, which shrink gives back
// once everything read is handed out.
func TestConnReader_BorrowsOnlyForMoreThanTheSmallBuffer(t *testing.T) {
	var pool bufPool
	small := bytes.Repeat([]byte{1}, 200)
	r := newConnReader(bytes.NewReader(small), &pool)
	if b, err := r.Peek(len(small)); err != nil || !bytes.Equal(b, small) {
		t.Fatalf("Peek: %v", err)
	}
	if r.large != nil {
		t.Fatal("a 200-byte frame borrowed a large buffer")
	}

	large := bytes.Repeat([]byte{2}, 5000)
	r = newConnReader(bytes.NewReader(large), &pool)
	if b, err := r.Peek(len(large)); err != nil || !bytes.Equal(b, large) {
		t.Fatalf("Peek: %v", err)
	}
	if r.large == nil {
		t.Fatal("a 5000-byte frame fits in the small buffer")
	}
	r.shrink()
	if r.large == nil {
		t.Fatal("shrink gave back a buffer holding unread bytes")
	}
	r.Discard(len(large))
	r.shrink()
	if r.large != nil || len(r.buf) != smallReadBuf {
		t.Fatal("shrink kept the large buffer of an empty reader")
	}

	// Byte by byte through a stream that fills the small buffer: after
	// the first full read the rest comes in large reads.
	var reads countingReader
	reads.r = bytes.NewReader(bytes.Repeat([]byte{3}, 100_000))
	r = newConnReader(&reads, &pool)
	for range 100_000 {
		if _, err := r.ReadByte(); err != nil {
			t.Fatal(err)
		}
	}
	if reads.n > 1+100_000/bufSize+1 {
		t.Errorf("%d reads for 100000 bytes, want about %d", reads.n, 1+100_000/bufSize)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.n++
	return c.r.Read(p)
}
