package proxy

import (
	"bytes"
	"regexp"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// A client's ApiVersions is the first request on every new connection, and
// the client sends nothing else until it is answered. Forwarding it costs a
// full upstream round trip before the connection can do anything, which on
// a busy upstream is most of a client's start-up (measured through the
// gateway with 50 consumers fetching: a new connection's ApiVersions took
// 5-50 ms, the request after it a fraction of that; see RATIONALE.md).
//
// The answer is the same for every connection to one broker until the
// broker is upgraded or its finalized features change, and the proxy
// rewrites it anyway. So once an upstream answer for a node and request
// version has passed through, later ApiVersions requests to that node are
// answered at once from it, and still forwarded ahead of the first request
// the connection forwards: the broker records the client's software name
// and version (KIP-511) for every connection it serves, and its answer,
// read and dropped, replaces the remembered one. A connection that forwards
// nothing (a consumer's group connection, whose requests the coordinator
// answers) never reaches the broker, so there is nothing to record (see
// conn.startDial). An answer is at most one forwarding connection behind
// the broker's own, and clients keep the highest finalized-features epoch
// they have seen (KIP-584), so a stale copy cannot take a feature back
// from them.
//
// Requests whose answer could differ from the remembered one are forwarded
// and answered by the broker: an error answer is never
// remembered, a request with a client software name or version the broker
// would refuse as INVALID_REQUEST (KIP-511's pattern) is not answered
// locally, and a change of the proxy's API table forgets every answer.

// softwarePattern is KIP-511's rule for ClientSoftwareName and
// ClientSoftwareVersion; brokers answer INVALID_REQUEST to others.
var softwarePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// avKey names one remembered ApiVersions answer: an upstream node and the
// request's version, which fixes the response's layout.
type avKey struct {
	node    int32
	version int16
}

// avAnswer is a remembered answer, valid for the API table it was limited
// to.
type avAnswer struct {
	table *apiTable
	body  []byte // response body, throttle time zeroed; never modified
	// raw is the upstream's body as it came, so that the same answer
	// seen again (every forwarded ApiVersions after a local answer) is
	// recognised without decoding and encoding it twice.
	raw []byte
}

// apiVersionsCache holds the latest successful ApiVersions answer per node
// and version. It is safe for concurrent use.
type apiVersionsCache struct {
	mu      sync.Mutex
	answers map[avKey]avAnswer
}

// get returns the remembered body for node and version, if it was limited
// to table.
func (c *apiVersionsCache) get(node int32, version int16, table *apiTable) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.answers[avKey{node, version}]
	// Compared by value: the refresher builds a new table on every poll,
	// usually equal to the last.
	if !ok || *a.table != *table {
		return nil, false
	}
	return a.body, true
}

// unchanged reports whether raw, an upstream answer's body for node and
// version, is the one remembered for table.
func (c *apiVersionsCache) unchanged(node int32, version int16, table *apiTable, raw []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.answers[avKey{node, version}]
	return ok && *a.table == *table && bytes.Equal(a.raw, raw)
}

// learn remembers the upstream's answer r for node and version, already
// limited to table, and raw, the body it was decoded from; an error
// answer is not remembered.
func (c *apiVersionsCache) learn(node int32, version int16, table *apiTable, r *kmsg.ApiVersionsResponse, raw []byte) {
	if r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
		return
	}
	cp := *r
	cp.ThrottleMillis = 0 // a throttle applied to one connection is not the next one's
	body := cp.AppendTo(nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil {
		c.answers = make(map[avKey]avAnswer)
	}
	c.answers[avKey{node, version}] = avAnswer{table: table, body: body, raw: bytes.Clone(raw)}
}

// answerableLocally reports whether an ApiVersions request at version, on a
// connection to the upstream node upstream of the cluster clusterID (""
// when not known yet), would get the broker's ordinary answer: from v3 the
// broker checks the client's software name and version, and from v5 that
// it is the cluster and the node the client names, if it names one (the
// connection may be misrouted; see retargetApiVersions). req is the
// request as decodeApiVersions read it: nil from v3 is a request the
// broker refuses.
func answerableLocally(version int16, req *kmsg.ApiVersionsRequest, upstream int32, clusterID string) bool {
	if version < 3 {
		return true
	}
	if req == nil {
		return false
	}
	if req.ClusterID != nil && (*req.ClusterID != clusterID || req.NodeID != upstream) {
		return false
	}
	return softwarePattern.MatchString(req.ClientSoftwareName) && softwarePattern.MatchString(req.ClientSoftwareVersion)
}

// decodeApiVersions reads an ApiVersions request body at version once for
// everything the proxy checks in it; nil before v3, which carries nothing
// it checks, and for a body that does not decode.
func decodeApiVersions(version int16, body []byte) *kmsg.ApiVersionsRequest {
	if version < 3 {
		return nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	if err := req.ReadFrom(body); err != nil {
		return nil
	}
	return req
}

// From ApiVersions v5 a client that has learnt the cluster names, on each
// new connection but a bootstrap one, the cluster and the node it means to
// reach, and the broker answers REBOOTSTRAP_REQUIRED when it is another:
// the client then drops every connection and bootstraps again, and a
// request it had already queued (a JoinGroup on its coordinator
// connection) can be left unanswered for good. Through the gateway a
// broker listener's node is the upstream node it forwards to, so those
// requests pass as they are. A gateway of a cluster is named to clients
// as a node of its own (FindCoordinator's answer, Options.Peers) and
// reached on its bootstrap listener, whose upstream connection goes to
// some broker: the request is retargeted to that broker before it is
// forwarded, the cluster id kept, so that the broker still checks that the
// client means its cluster. Any other node named on the bootstrap listener
// is a client that meant another address, and the broker's answer stands.

// retargetApiVersions is the ApiVersions request frame fr (body at its end,
// req decoded from it, nil when it did not decode) with the node it names
// replaced by the connection's upstream node when it names a gateway of
// the cluster on the bootstrap listener; fr and body themselves otherwise.
// req is changed to match.
func (c *conn) retargetApiVersions(hdr frame.RequestHeader, fr, body []byte, req *kmsg.ApiVersionsRequest) ([]byte, []byte) {
	if req == nil || req.Version < 5 || c.info.Node != NodeBootstrap || req.ClusterID == nil || !c.p.isPeerNode(req.NodeID) {
		return fr, body
	}
	req.NodeID = c.info.Upstream
	out := frame.AppendRequestHeader(make([]byte, 0, len(fr)), hdr)
	head := len(out)
	out = req.AppendTo(out)
	return out, out[head:]
}
