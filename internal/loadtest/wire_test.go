package loadtest

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// reorderingServer accepts one connection, answers ApiVersions, then
// reads batch heartbeats and answers them in reverse order, each with
// the error code its member id names.
func reorderingServer(t *testing.T, batch int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		type pending struct {
			corr int32
			resp kmsg.Response
		}
		var held []pending
		for {
			fr, err := frame.Read(nc, nil, 1<<20)
			if err != nil {
				return
			}
			h, _, err := frame.ParseRequestHeader(fr, false)
			if err != nil {
				return
			}
			req := kmsg.RequestForKey(h.Key)
			req.SetVersion(h.Version)
			_, body, err := frame.ParseRequestHeader(fr, req.IsFlexible())
			if err != nil || req.ReadFrom(body) != nil {
				return
			}
			resp := req.ResponseKind()
			switch r := req.(type) {
			case *kmsg.ApiVersionsRequest:
				ar := resp.(*kmsg.ApiVersionsResponse)
				for _, k := range []kmsg.Key{kmsg.ApiVersions, kmsg.Heartbeat} {
					ar.ApiKeys = append(ar.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(k), MaxVersion: kmsg.RequestForKey(int16(k)).MaxVersion()})
				}
				write(t, nc, h.CorrelationID, resp)
				continue
			case *kmsg.HeartbeatRequest:
				switch r.MemberID {
				case "rebalancing":
					resp.(*kmsg.HeartbeatResponse).ErrorCode = kerr.RebalanceInProgress.Code
				case "unknown":
					resp.(*kmsg.HeartbeatResponse).ErrorCode = kerr.UnknownMemberID.Code
				}
			}
			held = append(held, pending{h.CorrelationID, resp})
			if len(held) == batch {
				slices.Reverse(held)
				for _, p := range held {
					write(t, nc, p.corr, p.resp)
				}
				held = held[:0]
			}
		}
	}()
	return ln.Addr().String()
}

func write(t *testing.T, nc net.Conn, corr int32, resp kmsg.Response) {
	b, at := frame.AppendSize(nil)
	b = frame.AppendResponseHeader(b, corr, resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions))
	b = resp.AppendTo(b)
	frame.FinishSize(b, at)
	if _, err := nc.Write(b); err != nil {
		t.Log(err)
	}
}

// TestConn_PipelinedAnswersMatchTheirRequestsByCorrelationID sends three
// members' heartbeats on one shared connection; the server answers them
// in reverse, and each must reach its own member with its own error code.
func TestConn_PipelinedAnswersMatchTheirRequestsByCorrelationID(t *testing.T) {
	addr := reorderingServer(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, addr, kmsg.StringPtr("test"), time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if v := c.versions[kmsg.Heartbeat]; v != 4 {
		t.Errorf("negotiated Heartbeat v%d, want v4", v)
	}
	want := map[string]int16{"ok": 0, "rebalancing": kerr.RebalanceInProgress.Code, "unknown": kerr.UnknownMemberID.Code}
	dones := map[string]chan *call{}
	for id := range want {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID = "g", id
		dones[id] = make(chan *call, 1)
		c.send(newCall(req, dones[id]))
	}
	for id, code := range want {
		select {
		case cl := <-dones[id]:
			if cl.err != nil {
				t.Fatalf("%s: %v", id, cl.err)
			}
			if got := cl.resp.(*kmsg.HeartbeatResponse).ErrorCode; got != code || cl.rtt <= 0 {
				t.Errorf("%s: answered with code %d after %v, want code %d", id, got, cl.rtt, code)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no answer", id)
		}
	}
}

// TestConn_AFailureHandsBackEveryRequestInFlight closes the server side
// with requests in flight: each comes back with the error.
func TestConn_AFailureHandsBackEveryRequestInFlight(t *testing.T) {
	addr := reorderingServer(t, 100) // never answers a heartbeat
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, addr, nil, time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *call, 2)
	for range 2 {
		c.send(newCall(kmsg.NewPtrHeartbeatRequest(), done))
	}
	c.close()
	for range 2 {
		if cl := <-done; cl.err != errClosed {
			t.Errorf("request in flight came back with %v, want %v", cl.err, errClosed)
		}
	}
	c.send(newCall(kmsg.NewPtrHeartbeatRequest(), done))
	if cl := <-done; cl.err != errClosed {
		t.Errorf("request after the close came back with %v", cl.err)
	}
}
