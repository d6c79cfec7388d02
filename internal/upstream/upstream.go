// Package upstream reaches the upstream Kafka cluster through the gateway's
// own kgo client, for the two things the layers above need of it: sending a
// group request the coordinator has checked to the group's upstream
// coordinator, and knowing which broker coordinates which group. It must
// never import the proxy, the gateway, the driver, the coordinator or the
// runtime: it serves them without knowing them.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client reaches the upstream cluster through the gateway's own kgo client:
// it forwards checked group requests to the group's coordinator (kgo finds
// it and follows NOT_COORDINATOR), and looks up coordinators for the
// gateway's FindCoordinator answers and ListGroups merging. It is safe for
// concurrent use.
type Client struct {
	cl  *kgo.Client
	ttl time.Duration
	// forwarders carry Forward's single-group requests: cl and the clients
	// of WithForwarders. A Kafka broker handles one request of a
	// connection at a time, and a kgo client has one connection for them
	// per broker, so one client would queue every group's commits behind
	// each other's.
	forwarders []*kgo.Client

	mu      sync.Mutex
	known   map[string]cachedNode
	lookups map[string]*lookup // groups being looked up
	pruned  time.Time          // when expired entries of known were last dropped
}

type cachedNode struct {
	node int32
	at   time.Time
}

// New returns a Client over cl that remembers coordinators for ttl (0
// means 30s).
func New(cl *kgo.Client, ttl time.Duration) *Client {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &Client{cl: cl, ttl: ttl, forwarders: []*kgo.Client{cl}, known: make(map[string]cachedNode), lookups: make(map[string]*lookup)}
}

// WithForwarders adds clients of the same cluster that Forward spreads
// groups over, each group's requests on one of them (by a hash of its id),
// so that they stay in order. The caller closes them.
func (u *Client) WithForwarders(extra ...*kgo.Client) *Client {
	u.forwarders = append(u.forwarders, extra...)
	return u
}

// forwarderOf is the client that carries group's requests.
func (u *Client) forwarderOf(group string) *kgo.Client {
	if len(u.forwarders) == 1 {
		return u.forwarders[0]
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	return u.forwarders[h.Sum32()%uint32(len(u.forwarders))]
}

// Forward sends req to the upstream broker kgo routes it to: the group
// coordinator for group requests. It keeps the version the client chose:
// kgo would otherwise raise every request to the highest version both
// sides know, and a client's OffsetCommit v7 raised to v10 names its topics
// by a topic id it never filled in, so the upstream drops the commit.
func (u *Client) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	group, single := singleGroup(req)
	if !single {
		// kgo routes batched group requests itself; their fields do not
		// change meaning between versions the way topic names do.
		return u.cl.Request(ctx, req)
	}
	for attempt := 0; ; attempt++ {
		node, err := u.CoordinatorOf(ctx, group)
		if err != nil {
			return nil, err
		}
		resp, err := u.forwarderOf(group).Broker(int(node)).Request(ctx, pinned{req})
		if err != nil {
			return nil, fmt.Errorf("%s to coordinator %d of %s: %w", kmsg.NameForKey(req.Key()), node, group, err)
		}
		if attempt == 0 && movedCoordinator(resp) {
			u.Forget(group)
			continue
		}
		return resp, nil
	}
}

// pinned holds a request at the version it already has: kgo sends a
// request at the lower of its MaxVersion and the broker's maximum.
type pinned struct{ kmsg.Request }

func (p pinned) MaxVersion() int16 { return p.GetVersion() }

// singleGroup returns the group of the requests that name exactly one.
func singleGroup(req kmsg.Request) (string, bool) {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return r.Group, true
	case *kmsg.TxnOffsetCommitRequest:
		return r.Group, true
	case *kmsg.OffsetDeleteRequest:
		return r.Group, true
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 { // from v8 a request may name several groups
			return r.Group, true
		}
	}
	return "", false
}

// movedCoordinator reports whether resp says the group's coordinator is
// elsewhere now, so the cached one must be looked up again.
func movedCoordinator(resp kmsg.Response) bool {
	switch r := resp.(type) {
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if CoordinatorMoved(p.ErrorCode) {
					return true
				}
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if CoordinatorMoved(p.ErrorCode) {
					return true
				}
			}
		}
	case *kmsg.OffsetDeleteResponse:
		return CoordinatorMoved(r.ErrorCode)
	}
	return false
}

// Forget drops the remembered coordinator of group, so that the next
// lookup asks the upstream.
func (u *Client) Forget(group string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.known, group)
}

// CoordinatorOf returns the node id of group's upstream coordinator.
func (u *Client) CoordinatorOf(ctx context.Context, group string) (int32, error) {
	// Every forwarded commit asks: a remembered coordinator is answered
	// without the batch's bookkeeping.
	u.mu.Lock()
	node, ok := u.rememberedLocked(group, time.Now())
	u.mu.Unlock()
	if ok {
		return node, nil
	}
	nodes, err := u.CoordinatorsOf(ctx, []string{group})
	if node, ok := nodes[group]; ok {
		return node, nil
	}
	return 0, err
}

// CoordinatorsOf returns the node ids of the upstream coordinators of
// groups, looking up those it does not remember in one batched
// FindCoordinator (kgo splits it for brokers older than v4). A group
// already being looked up by another call is waited for, not asked again:
// fifty consumers of a new group look it up at once. A group whose lookup
// failed is missing from the map, and err says why for each.
func (u *Client) CoordinatorsOf(ctx context.Context, groups []string) (map[string]int32, error) {
	nodes := make(map[string]int32, len(groups))
	var missing, waited []string
	var others []*lookup
	asked := make(map[string]bool)
	now := time.Now()
	u.mu.Lock()
	for _, g := range groups {
		if asked[g] {
			continue
		}
		asked[g] = true
		if node, ok := u.rememberedLocked(g, now); ok {
			nodes[g] = node
		} else if l, ok := u.lookups[g]; ok {
			waited = append(waited, g)
			if !slices.Contains(others, l) {
				others = append(others, l)
			}
		} else {
			missing = append(missing, g)
		}
	}
	var mine *lookup
	if len(missing) > 0 {
		mine = &lookup{done: make(chan struct{})}
		for _, g := range missing {
			u.lookups[g] = mine
		}
	}
	u.mu.Unlock()

	var errs []error
	if mine != nil {
		found, err := u.lookup(ctx, missing, now)
		mine.err = err
		u.mu.Lock()
		u.pruneLocked(now)
		for g, c := range found {
			u.known[g] = c
			nodes[g] = c.node
		}
		for _, g := range missing {
			if u.lookups[g] == mine {
				delete(u.lookups, g)
			}
		}
		u.mu.Unlock()
		close(mine.done)
		if err != nil {
			errs = append(errs, err)
		}
	}
	// A lookup runs under the context of the call that started it, so it
	// ends early when that call's client leaves; the groups it was to find
	// are then looked up again under this call's context.
	cutShort := false
	for _, l := range others {
		select {
		case <-l.done:
			switch {
			case l.err == nil:
			case errors.Is(l.err, context.Canceled) || errors.Is(l.err, context.DeadlineExceeded):
				cutShort = true
			case !slices.ContainsFunc(errs, func(e error) bool { return e == l.err }):
				errs = append(errs, l.err)
			}
		case <-ctx.Done():
			return nodes, errors.Join(append(errs, ctx.Err())...)
		}
	}
	var again []string
	u.mu.Lock()
	for _, g := range waited {
		if c, ok := u.known[g]; ok {
			nodes[g] = c.node
		} else if cutShort {
			again = append(again, g)
		}
	}
	u.mu.Unlock()
	if len(again) > 0 && ctx.Err() == nil {
		more, err := u.CoordinatorsOf(ctx, again)
		maps.Copy(nodes, more)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nodes, errors.Join(errs...)
}

// rememberedLocked is group's coordinator if it was learnt less than the
// ttl before now.
func (u *Client) rememberedLocked(group string, now time.Time) (int32, bool) {
	c, ok := u.known[group]
	if !ok || now.Sub(c.at) >= u.ttl {
		return 0, false
	}
	return c.node, true
}

// lookup is one FindCoordinator in flight, which other calls for its
// groups wait for; err is set before done is closed.
type lookup struct {
	done chan struct{}
	err  error
}

// lookup asks the upstream for the coordinators of groups. It returns
// those it learnt, and an error naming the others.
func (u *Client) lookup(ctx context.Context, groups []string, now time.Time) (map[string]cachedNode, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = groups[0]
	req.CoordinatorKeys = groups
	resp, err := req.RequestWith(ctx, u.cl)
	if err != nil {
		return nil, fmt.Errorf("FindCoordinator %s: %w", someOf(groups), err)
	}
	var errs []error
	found := make(map[string]cachedNode, len(groups))
	answered := make(map[string]bool, len(groups))
	var unanswered []string
	for _, c := range resp.Coordinators {
		answered[c.Key] = true
		if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
			if len(errs) < maxGroupErrors {
				errs = append(errs, fmt.Errorf("FindCoordinator %s: %w", c.Key, err))
			}
			continue
		}
		found[c.Key] = cachedNode{node: c.NodeID, at: now}
	}
	for _, g := range groups {
		if !answered[g] {
			unanswered = append(unanswered, g)
		}
	}
	if len(unanswered) > 0 {
		errs = append(errs, fmt.Errorf("FindCoordinator %s: the upstream did not answer for them", someOf(unanswered)))
	}
	return found, errors.Join(errs...)
}

// maxGroupErrors caps the per-group errors CoordinatorsOf returns: a
// cluster-wide failure would otherwise log one line per group.
const maxGroupErrors = 3

// someOf names the first few of groups and counts the rest.
func someOf(groups []string) string {
	if len(groups) <= maxGroupErrors {
		return strings.Join(groups, ", ")
	}
	return fmt.Sprintf("%s and %d more groups", strings.Join(groups[:maxGroupErrors], ", "), len(groups)-maxGroupErrors)
}

// pruneLocked drops expired coordinators, at most once per ttl, so that the
// cache holds only groups looked up recently rather than every group the
// gateway ever listed.
func (u *Client) pruneLocked(now time.Time) {
	if now.Sub(u.pruned) < u.ttl {
		return
	}
	u.pruned = now
	for g, c := range u.known {
		if now.Sub(c.at) >= u.ttl {
			delete(u.known, g)
		}
	}
}

// CoordinatorMoved reports whether code says a group's coordinator is not
// the broker asked (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE), so the one
// remembered must be looked up again.
func CoordinatorMoved(code int16) bool {
	return code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code
}
