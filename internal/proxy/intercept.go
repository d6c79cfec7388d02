package proxy

import (
	"context"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConnInfo describes the client connection a request arrived on.
type ConnInfo struct {
	// ID is unique per proxy for the life of the process.
	ID uint64
	// Remote is the client's address.
	Remote netip.AddrPort
	// ClientHost is Remote as Kafka's group coordinator names a member's
	// host: "/" and the IP. It is made once per connection, since every
	// group request of the connection names it.
	ClientHost string
	// Node is the upstream broker the connection's listener stands for,
	// or [NodeBootstrap].
	Node int32
	// Upstream is the broker the connection's upstream side is connected
	// to: Node, or for a bootstrap connection the broker it was given.
	Upstream int32
}

// KafkaHost is the Kafka form of a client address: "/" and its IP, as
// DescribeGroups reports a member's host.
func KafkaHost(a netip.AddrPort) string { return "/" + a.Addr().Unmap().String() }

// Request is one decoded client request handed to an [Interceptor].
type Request struct {
	Conn ConnInfo
	// ClientID is the header's client id; nil when the client sent null.
	ClientID *string
	// CorrelationID is the header's correlation id.
	CorrelationID int32
	// Req is the decoded body, at the version the client used. It does not
	// alias the proxy's buffers, so the interceptor may keep it. Its bytes
	// fields, and the strings of the requests in aliasedStrings, share one
	// copy of the request's frame, made for it alone: a string kept from
	// one of those keeps the whole frame.
	Req kmsg.Request
}

// Decision is what an [Interceptor] does with a request. At most one of
// Respond and Forward is set; with neither, the original bytes are
// forwarded.
type Decision struct {
	// Respond answers the request locally. Its key must be the request's;
	// the proxy sets its version to the request's.
	Respond kmsg.Response
	// Forward replaces the request sent upstream on this connection. Its
	// key must be the request's; the proxy sets its version to the
	// request's and keeps the client's header.
	Forward kmsg.Request
	// OnResponse, when set and the request goes upstream, is applied to the
	// decoded upstream response before the proxy's own rewriting; it may
	// modify and return its argument, or return another response of the
	// same key.
	OnResponse func(kmsg.Response) kmsg.Response
}

// Interceptor lets the coordinator answer or rewrite requests.
//
// # Notes
//
// Intercept runs on its own goroutine per request, so it may block (a
// JoinGroup waits for the rebalance) without delaying other connections or
// the requests behind it on the same connection; their responses still
// wait for its answer, to keep the connection's order. ctx is cancelled when
// the connection closes. A request that Intercept forwards is sent upstream
// when Intercept returns, so it may overtake or be overtaken by requests
// the client pipelined after it; responses are reordered back.
//
// An error closes the client connection, as a broker closes a connection
// whose request it cannot handle.
type Interceptor interface {
	// Intercepts reports whether requests with key are handed to Intercept;
	// for every other key the proxy forwards the bytes without decoding.
	// It is called for every request and must be fast. Produce requests
	// with acks=0 are never intercepted.
	Intercepts(key int16) bool
	// Intercept decides what to do with req.
	Intercept(ctx context.Context, req Request) (Decision, error)
}

// aliasedStrings says which requests are decoded with their strings
// pointing into the request's own copy of its frame rather than copied:
// Heartbeat and OffsetCommit, which every member sends all the time and
// whose strings (group and member ids, a commit's topic names) an
// interceptor looks up or forwards but has no reason to keep. Copied, they
// are an allocation per string: a hundred for a commit of a hundred topics.
func aliasedStrings(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Heartbeat, kmsg.OffsetCommit:
		return true
	}
	return false
}

// decodeRequest decodes body into req, which has its version set; body is
// the request's own copy, never written to afterwards.
func decodeRequest(req kmsg.Request, body []byte) error {
	if u, ok := req.(interface{ UnsafeReadFrom([]byte) error }); ok && aliasedStrings(req.Key()) {
		return u.UnsafeReadFrom(body)
	}
	return req.ReadFrom(body)
}
