package proxy

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProxy_RoutedNodesAreAdvertisedAtTheOtherGateway: with Route, a
// Metadata answer gives each upstream node the address Route names, and
// this gateway's own listener for the others; ListenFor opens a listener
// for every node asked, and returns them all.
func TestProxy_RoutedNodesAreAdvertisedAtTheOtherGateway(t *testing.T) {
	elsewhere := Peer{Host: "10.0.0.2", Port: 29092}
	e := startEnv(t, 3, func(o *Options) {
		o.Route = func(node int32) (Peer, bool) { return elsewhere, node == 1 }
	})
	ports, err := e.proxy.ListenFor([]int32{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 {
		t.Fatalf("ListenFor(0, 1, 2) gave %v, want three listeners", ports)
	}
	r := dialRaw(t, e.proxy.Addr())
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	resp := r.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 3 {
		t.Fatalf("Metadata lists %d brokers, want 3", len(resp.Brokers))
	}
	for _, b := range resp.Brokers {
		want := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[b.NodeID])))
		if b.NodeID == 1 {
			want = net.JoinHostPort(elsewhere.Host, strconv.Itoa(int(elsewhere.Port)))
		}
		if got := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); got != want {
			t.Errorf("node %d advertised at %s, want %s", b.NodeID, got, want)
		}
	}
}

// TestProxy_DrainClosesConnectionsAndWaitsForQuiet: Drain closes the
// connections it finds, keeps the listeners open for clients that come
// back, and returns only once no request has been read for its quiet
// period.
func TestProxy_DrainClosesConnectionsAndWaitsForQuiet(t *testing.T) {
	e := startEnv(t, 1, nil)
	old := dialRaw(t, e.proxy.Addr())
	old.roundTrip(kmsg.NewPtrApiVersionsRequest())

	const quiet = 300 * time.Millisecond
	drained := make(chan time.Time, 1)
	started := time.Now()
	go func() {
		e.proxy.Drain(context.Background(), quiet)
		drained <- time.Now()
	}()
	if !old.closedByPeer() {
		t.Fatal("Drain left a connection open")
	}
	// A client that comes back is served, and keeps the drain going.
	back := dialRaw(t, e.proxy.Addr())
	var lastRequest time.Time
	for range 5 {
		back.roundTrip(kmsg.NewPtrApiVersionsRequest())
		lastRequest = time.Now()
		time.Sleep(quiet / 2)
	}
	select {
	case at := <-drained:
		if at.Before(lastRequest.Add(quiet)) {
			t.Fatalf("Drain returned %v after it started, %v after the last request: sooner than its quiet period", at.Sub(started), at.Sub(lastRequest))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return once the clients were quiet")
	}
}
