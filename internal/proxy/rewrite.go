package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// advertiser maps an upstream node, with the host and port the upstream
// gave for it, to the address clients must use instead; false when the
// node cannot be advertised (a negative id, or no listener could be
// opened).
type advertiser func(node int32, host string, port int32) (string, int32, bool)

// namesBrokers reports whether responses to key at version can carry
// broker addresses, and so must be decoded and rewritten.
func namesBrokers(key, version int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Metadata, kmsg.FindCoordinator, kmsg.DescribeCluster:
		return true
	case kmsg.Produce: // KIP-951 node endpoints from v10
		return version >= 10
	case kmsg.Fetch: // KIP-951 node endpoints from v16
		return version >= 16
	}
	return false
}

// rewriteAddresses replaces every broker address in resp with the
// advertised one, and reports whether it changed anything. Brokers that
// cannot be advertised are dropped from broker lists; a coordinator that
// cannot be is answered as COORDINATOR_NOT_AVAILABLE, so that the client
// retries rather than connects to the upstream.
func rewriteAddresses(resp kmsg.Response, adv advertiser) bool {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		r.Brokers = rewriteEndpoints(r.Brokers, func(b *kmsg.MetadataResponseBroker) (*int32, *string, *int32) { return &b.NodeID, &b.Host, &b.Port }, adv)
		return true
	case *kmsg.FindCoordinatorResponse:
		// v4 (KIP-699) moved the coordinator into a batch; the
		// top-level fields are not on the wire there.
		if r.Version < 4 {
			rewriteCoordinator(&r.NodeID, &r.Host, &r.Port, &r.ErrorCode, adv)
			return true
		}
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			rewriteCoordinator(&c.NodeID, &c.Host, &c.Port, &c.ErrorCode, adv)
		}
		return true
	case *kmsg.DescribeClusterResponse:
		r.Brokers = rewriteEndpoints(r.Brokers, func(b *kmsg.DescribeClusterResponseBroker) (*int32, *string, *int32) {
			return &b.NodeID, &b.Host, &b.Port
		}, adv)
		return true
	case *kmsg.ProduceResponse:
		if len(r.Brokers) == 0 {
			return false
		}
		r.Brokers = rewriteEndpoints(r.Brokers, func(b *kmsg.ProduceResponseBroker) (*int32, *string, *int32) { return &b.NodeID, &b.Host, &b.Port }, adv)
		return true
	case *kmsg.FetchResponse:
		if len(r.Brokers) == 0 {
			return false
		}
		r.Brokers = rewriteEndpoints(r.Brokers, func(b *kmsg.FetchResponseBroker) (*int32, *string, *int32) { return &b.NodeID, &b.Host, &b.Port }, adv)
		return true
	}
	return false
}

// rewriteEndpoints points each broker endpoint of a response at the gateway
// and drops those the gateway does not front; field picks out an element's
// node id, host and port.
func rewriteEndpoints[B any](bs []B, field func(*B) (node *int32, host *string, port *int32), adv advertiser) []B {
	out := bs[:0]
	for i := range bs {
		node, host, port := field(&bs[i])
		if *host, *port, _ = adv(*node, *host, *port); *host != "" {
			out = append(out, bs[i])
		}
	}
	return out
}

func rewriteCoordinator(node *int32, host *string, port *int32, code *int16, adv advertiser) {
	if *node < 0 && *host == "" {
		return // an error answer names no broker
	}
	h, p, ok := adv(*node, *host, *port)
	if !ok {
		*node, *host, *port = -1, "", -1
		if *code == 0 {
			*code = kerr.CoordinatorNotAvailable.Code
		}
		return
	}
	*host, *port = h, p
}

// appendPeers lists the cluster's gateways in a Metadata answer after its
// brokers, as rewriteMetadataBrokers does in place: each once, with no
// rack.
func appendPeers(r *kmsg.MetadataResponse, peers []Peer) {
	for _, pr := range peers {
		if !slices.ContainsFunc(r.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == pr.Node }) {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = pr.Node, pr.Host, pr.Port
			r.Brokers = append(r.Brokers, b)
		}
	}
}

// errNotRewritten is returned by rewriteResponseBody when the response is
// fine as it is.
var errNotRewritten = errors.New("response needs no rewrite")

// decodeResponse decodes a response body (after the header) to key at
// version.
func decodeResponse(key, version int16, body []byte) (kmsg.Response, error) {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return nil, fmt.Errorf("response to unknown key %d", key)
	}
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(key), version, err)
	}
	return resp, nil
}

// rewriteResponseBody decodes a response body naming brokers, rewrites the
// addresses and encodes it again (a Metadata response only as far as its
// broker list, see metadata.go); errNotRewritten when the bytes can go out
// unchanged.
func rewriteResponseBody(key, version int16, body []byte, adv advertiser, peers []Peer) ([]byte, error) {
	if (key == int16(kmsg.Fetch) && !fetchHasTopLevelTags(body)) || (key == int16(kmsg.Produce) && !produceHasTopLevelTags(body, version)) {
		return nil, errNotRewritten
	}
	if key == int16(kmsg.Metadata) {
		if out, err := rewriteMetadataBrokers(version, body, adv, peers); err == nil {
			return out, nil
		}
		// A broker list the walk cannot read: the full decode says why.
	}
	resp, err := decodeResponse(key, version, body)
	if err != nil {
		return nil, err
	}
	if !rewriteAddresses(resp, adv) {
		return nil, errNotRewritten
	}
	if r, ok := resp.(*kmsg.MetadataResponse); ok {
		appendPeers(r, peers)
	}
	return resp.AppendTo(nil), nil
}

// rewriteApiVersions limits an ApiVersions response to what the proxy
// accepts. A response carrying an error (UNSUPPORTED_VERSION is in v0
// format whatever the request's version, KIP-511) passes unchanged.
func rewriteApiVersions(version int16, body []byte, t *apiTable) ([]byte, error) {
	r, err := limitedApiVersions(version, body, t)
	if err != nil {
		return nil, err
	}
	return r.AppendTo(nil), nil
}

// limitedApiVersions decodes an ApiVersions response body and limits it as
// rewriteApiVersions does; an error answer is errNotRewritten.
func limitedApiVersions(version int16, body []byte, t *apiTable) (*kmsg.ApiVersionsResponse, error) {
	if len(body) >= 2 && binary.BigEndian.Uint16(body) != 0 {
		return nil, errNotRewritten
	}
	resp, err := decodeResponse(int16(kmsg.ApiVersions), version, body)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	limitApiVersions(r, t)
	return r, nil
}

func limitApiVersions(r *kmsg.ApiVersionsResponse, t *apiTable) {
	out := r.ApiKeys[:0]
	for _, k := range r.ApiKeys {
		if k.ApiKey < 0 || k.ApiKey > maxKey || !t.has[k.ApiKey] {
			continue
		}
		k.MinVersion, k.MaxVersion = max(k.MinVersion, t.min[k.ApiKey]), min(k.MaxVersion, t.max[k.ApiKey])
		if k.MinVersion > k.MaxVersion {
			continue
		}
		out = append(out, k)
	}
	r.ApiKeys = out
}

// unsupportedApiVersions is the KIP-511 answer to an ApiVersions request at
// a version above the proxy's: v0, UNSUPPORTED_VERSION, and only the
// ApiVersions range, so the client retries at a version both know.
func unsupportedApiVersions(t *apiTable) *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 0
	r.ErrorCode = kerr.UnsupportedVersion.Code
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey = int16(kmsg.ApiVersions)
	k.MinVersion, k.MaxVersion = t.min[kmsg.ApiVersions], t.max[kmsg.ApiVersions]
	r.ApiKeys = append(r.ApiKeys, k)
	return r
}

// produceAcks reads the acks of a Produce request body without decoding
// the rest: v3+ start with the transactional id, then acks.
func produceAcks(body []byte, version int16, flexible bool) (int16, error) {
	if version >= 3 {
		if flexible {
			n, rest, ok := readUvarint(body)
			if !ok {
				return 0, errors.New("produce: truncated transactional id")
			}
			if n > 0 {
				if n-1 > uint64(len(rest)) {
					return 0, errors.New("produce: transactional id overruns the request")
				}
				rest = rest[n-1:]
			}
			body = rest
		} else {
			if len(body) < 2 {
				return 0, errors.New("produce: truncated transactional id")
			}
			n := int16(binary.BigEndian.Uint16(body))
			body = body[2:]
			if n > 0 {
				if int(n) > len(body) {
					return 0, errors.New("produce: transactional id overruns the request")
				}
				body = body[n:]
			}
		}
	}
	if len(body) < 2 {
		return 0, errors.New("produce: truncated acks")
	}
	return int16(binary.BigEndian.Uint16(body)), nil
}

func readUvarint(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i := 0; i < 5 && i < len(b); i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, b[i+1:], true
		}
	}
	return 0, nil, false
}

// encodeResponse encodes a complete response frame body (header and body,
// without the size prefix) for correlationID.
func encodeResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	dst = frame.AppendResponseHeader(dst, correlationID, resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions))
	return resp.AppendTo(dst)
}

// fetchHasTopLevelTags walks a flexible Fetch response body (v16 or
// later, where topics are named by id) without allocating, and reports
// whether its top-level tagged fields are non-empty: the only place the
// KIP-951 node endpoints live. Most Fetch responses carry none and can be
// forwarded as they are, which saves decoding and copying every record
// batch. A body it cannot walk reports true, so the caller decodes it
// and finds the error.
func fetchHasTopLevelTags(body []byte) bool {
	w := walker{b: body}
	w.skip(4 + 2 + 4) // throttle, error code, session id
	for range w.compactLen() {
		w.skip(16) // topic id
		for range w.compactLen() {
			w.skip(4 + 2 + 8 + 8 + 8) // partition, error, high watermark, last stable offset, log start offset
			for range w.compactLen() {
				w.skip(8 + 8) // producer id, first offset
				w.tags()
			}
			w.skip(4)              // preferred read replica
			w.skip(w.compactLen()) // record batches
			w.tags()
		}
		w.tags()
	}
	if w.bad || len(w.b) == 0 {
		return true
	}
	return !(len(w.b) == 1 && w.b[0] == 0)
}

// produceHasTopLevelTags is [fetchHasTopLevelTags] for a Produce response
// of version 10 or later.
func produceHasTopLevelTags(body []byte, version int16) bool {
	w := walker{b: body}
	for range w.compactLen() {
		if version >= 13 {
			w.skip(16) // topic id
		} else {
			w.skip(w.compactLen()) // topic name
		}
		for range w.compactLen() {
			w.skip(4 + 2 + 8 + 8 + 8) // partition, error, base offset, log append time, log start offset
			for range w.compactLen() {
				w.skip(4)              // relative offset
				w.skip(w.compactLen()) // error message
				w.tags()
			}
			w.skip(w.compactLen()) // error message
			w.tags()
		}
		w.tags()
	}
	w.skip(4) // throttle
	if w.bad || len(w.b) == 0 {
		return true
	}
	return !(len(w.b) == 1 && w.b[0] == 0)
}

// walker skips over wire fields; once bad, every step is a no-op.
type walker struct {
	b   []byte
	bad bool
}

func (w *walker) skip(n int) {
	if w.bad || n < 0 || n > len(w.b) {
		w.bad = true
		return
	}
	w.b = w.b[n:]
}

// compactLen reads a compact array or bytes length (null reads as 0).
func (w *walker) compactLen() int {
	if w.bad {
		return 0
	}
	n, rest, ok := readUvarint(w.b)
	if !ok || n > uint64(len(rest))+1 {
		w.bad = true
		return 0
	}
	w.b = rest
	if n == 0 {
		return 0
	}
	return int(n - 1)
}

func (w *walker) int32() int32 {
	if w.bad || len(w.b) < 4 {
		w.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(w.b))
	w.b = w.b[4:]
	return v
}

// length reads a string (int16) or, wide, an array (int32) length, or a
// compact one in flexible versions; null reads as -1.
func (w *walker) length(flexible, wide bool) int {
	switch {
	case w.bad:
		return 0
	case flexible:
		return w.compactLenOrNull()
	case wide:
		return int(w.int32())
	case len(w.b) < 2:
		w.bad = true
		return 0
	}
	v := int16(binary.BigEndian.Uint16(w.b))
	w.b = w.b[2:]
	return int(v)
}

// compactLenOrNull is compactLen with null reading as -1.
func (w *walker) compactLenOrNull() int {
	null := len(w.b) > 0 && w.b[0] == 0
	n := w.compactLen()
	if null && !w.bad {
		return -1
	}
	return n
}

// str reads a string that must not be null.
func (w *walker) str(flexible bool) string {
	n := w.length(flexible, false)
	if w.bad || n < 0 || n > len(w.b) {
		w.bad = true
		return ""
	}
	s := string(w.b[:n])
	w.b = w.b[n:]
	return s
}

func (w *walker) tags() {
	if w.bad {
		return
	}
	rest, err := frame.SkipTags(w.b)
	if err != nil {
		w.bad = true
		return
	}
	w.b = rest
}
