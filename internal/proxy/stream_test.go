package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/mempipe"
	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// fetchWithEndpoints returns a Fetch response body naming brokers at
// upstream hosts of the given lengths.
func fetchWithEndpoints(version int16, hosts ...string) []byte {
	r := kmsg.NewPtrFetchResponse()
	r.Version = version
	tp := kmsg.NewFetchResponseTopic()
	pp := kmsg.NewFetchResponseTopicPartition()
	pp.ErrorCode = 6
	pp.RecordBatches = bytes.Repeat([]byte{7}, 300)
	tp.Partitions = append(tp.Partitions, pp)
	r.Topics = append(r.Topics, tp)
	for i, h := range hosts {
		r.Brokers = append(r.Brokers, kmsg.FetchResponseBroker{NodeID: int32(i), Host: h, Port: 9092})
	}
	return r.AppendTo(nil)
}

// streamFetch runs a Fetch response body through the streaming rewriter
// and returns what the client would read after the size prefix.
func streamFetch(version int16, body []byte) ([]byte, error) {
	in := frame.AppendResponseHeader(nil, 42, true)
	in = append(in, body...)
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	st := &streamer{r: bufio.NewReader(bytes.NewReader(in)), w: w, left: int64(len(in))}
	if err := st.fetch(version, fuzzAdvertise); err != nil {
		return nil, err
	}
	w.Flush()
	if out.Len() != len(in) {
		return nil, errStreamMalformed
	}
	_, b, err := frame.ParseResponseHeader(out.Bytes(), true)
	return b, err
}

func TestStreamFetch_RewritesEndpointsInPlaceOrDropsThem(t *testing.T) {
	cases := []struct {
		name      string
		hosts     []string
		wantKept  bool // the endpoints fit once rewritten
		wantNodes int
	}{
		{"no endpoints", nil, true, 0},
		{"longer upstream hosts: rewritten and padded", []string{"broker-0.kafka.internal.example.com", "broker-1.kafka.internal.example.com"}, true, 2},
		{"shorter upstream hosts: dropped", []string{"k0", "k1"}, false, 0},
	}
	for v := int16(16); v <= kmsgMax(int16(kmsg.Fetch)); v++ {
		for _, tc := range cases {
			body := fetchWithEndpoints(v, tc.hosts...)
			out, err := streamFetch(v, body)
			if err != nil {
				t.Fatalf("v%d %s: %v", v, tc.name, err)
			}
			if len(out) != len(body) {
				t.Fatalf("v%d %s: %d bytes out of %d", v, tc.name, len(out), len(body))
			}
			resp, err := decodeResponse(int16(kmsg.Fetch), v, out)
			if err != nil {
				t.Fatalf("v%d %s: streamed response does not decode: %v", v, tc.name, err)
			}
			r := resp.(*kmsg.FetchResponse)
			if err := checkAdvertised(r); err != nil {
				t.Errorf("v%d %s: %v", v, tc.name, err)
			}
			if len(r.Brokers) != tc.wantNodes {
				t.Errorf("v%d %s: %d endpoints, want %d", v, tc.name, len(r.Brokers), tc.wantNodes)
			}
			if len(r.Topics) != 1 || !bytes.Equal(r.Topics[0].Partitions[0].RecordBatches, bytes.Repeat([]byte{7}, 300)) {
				t.Errorf("v%d %s: records changed", v, tc.name)
			}
			if len(tc.hosts) == 0 && !bytes.Equal(out, body) {
				t.Errorf("v%d %s: a response without endpoints was changed", v, tc.name)
			}
		}
	}
}

// FuzzStreamFetch: arbitrary Fetch bodies through the streaming rewriter
// never panic, never change the length, and never leak an address.
func FuzzStreamFetch(f *testing.F) {
	for v := int16(16); v <= kmsgMax(int16(kmsg.Fetch)); v++ {
		f.Add(uint8(v), fetchWithEndpoints(v))
		f.Add(uint8(v), fetchWithEndpoints(v, "upstream-broker-with-a-long-name", "x"))
		f.Add(uint8(v), fetchWithEndpoints(v, "a", "b", "c"))
	}
	f.Fuzz(func(t *testing.T, vb uint8, body []byte) {
		version := 16 + int16(vb%uint8(kmsgMax(int16(kmsg.Fetch))-15))
		out, err := streamFetch(version, body)
		if err != nil {
			return // the connection is closed
		}
		if len(out) != len(body) {
			t.Fatalf("%d bytes out of %d", len(out), len(body))
		}
		resp, err := decodeResponse(int16(kmsg.Fetch), version, out)
		if err != nil {
			if _, derr := decodeResponse(int16(kmsg.Fetch), version, body); derr == nil {
				t.Fatalf("a decodable response became undecodable: %v", err)
			}
			return
		}
		if err := checkAdvertised(resp); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCopyLong_MovesExactlyNBytesInOrderBetweenAnyConnections checks the
// long-run copy on both of its paths, splice between TCP connections and
// the chunk buffer otherwise: the destination gets exactly the n bytes
// after what the reader had already consumed, whatever part of them sat in
// the reader's buffer, and the bytes after them are left for the reader.
func TestCopyLong_MovesExactlyNBytesInOrderBetweenAnyConnections(t *testing.T) {
	tcpPair := func(t *testing.T) (net.Conn, net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		a, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		b, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	pipePair := func(t *testing.T) (net.Conn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	// The embedded cluster's connections, whose bytes go to the
	// destination without a buffer between.
	memPair := func(t *testing.T) (net.Conn, net.Conn) {
		a, b := mempipe.New(nil, nil)
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	pool := &sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}
	for _, pair := range []struct {
		name string
		make func(*testing.T) (net.Conn, net.Conn)
	}{{"tcp", tcpPair}, {"pipe", pipePair}, {"mempipe", memPair}} {
		for _, tc := range []struct {
			name     string
			skip, n  int // bytes read before the copy, bytes copied
			trailing int // bytes after the copied ones
		}{
			{"all buffered", 10, 100, 50},
			{"longer than the buffer", 100, 3 << 20, 1000},
			{"ends exactly at the data", 0, 1 << 20, 0},
		} {
			t.Run(pair.name+"/"+tc.name, func(t *testing.T) {
				srcW, srcR := pair.make(t)
				dstW, dstR := pair.make(t)
				data := make([]byte, tc.skip+tc.n+tc.trailing)
				for i := range data {
					data[i] = byte(i * 7 / 3)
				}
				go func() { srcW.Write(data) }()
				got := make(chan []byte, 1)
				go func() {
					b := make([]byte, tc.n)
					_, err := io.ReadFull(dstR, b)
					if err != nil {
						b = nil
					}
					got <- b
				}()
				r := bufio.NewReaderSize(srcR, 4096)
				if _, err := io.ReadFull(r, make([]byte, tc.skip)); err != nil {
					t.Fatal(err)
				}
				if err := copyLong(bufio.NewWriter(dstW), dstW, r, srcR, int64(tc.n), pool); err != nil {
					t.Fatalf("copyLong: %v", err)
				}
				if b := <-got; !bytes.Equal(b, data[tc.skip:tc.skip+tc.n]) {
					t.Fatal("the destination did not receive exactly the copied bytes")
				}
				rest := make([]byte, tc.trailing)
				if _, err := io.ReadFull(r, rest); err != nil || !bytes.Equal(rest, data[tc.skip+tc.n:]) {
					t.Fatalf("the bytes after the copied ones were not left for the reader (%v)", err)
				}
			})
		}
	}
}
