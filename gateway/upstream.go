package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KgoUpstream reaches the upstream cluster through the gateway's own kgo
// client: it forwards checked group requests to the group's coordinator
// (kgo finds it and follows NOT_COORDINATOR), and looks up coordinators for
// ListGroups merging.
type KgoUpstream struct {
	cl  *kgo.Client
	ttl time.Duration

	mu    sync.Mutex
	known map[string]cachedNode
}

type cachedNode struct {
	node int32
	at   time.Time
}

// NewKgoUpstream returns an upstream over cl that remembers coordinators
// for ttl (0 means 30s).
func NewKgoUpstream(cl *kgo.Client, ttl time.Duration) *KgoUpstream {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &KgoUpstream{cl: cl, ttl: ttl, known: make(map[string]cachedNode)}
}

// Forward sends req to the upstream broker kgo routes it to: the group
// coordinator for group requests.
func (u *KgoUpstream) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return u.cl.Request(ctx, req)
}

// CoordinatorOf returns the node id of group's upstream coordinator.
func (u *KgoUpstream) CoordinatorOf(ctx context.Context, group string) (int32, error) {
	u.mu.Lock()
	c, ok := u.known[group]
	u.mu.Unlock()
	if ok && time.Since(c.at) < u.ttl {
		return c.node, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := req.RequestWith(ctx, u.cl)
	if err != nil {
		return 0, fmt.Errorf("FindCoordinator %s: %w", group, err)
	}
	node, code := resp.NodeID, resp.ErrorCode
	if len(resp.Coordinators) > 0 {
		node, code = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return 0, fmt.Errorf("FindCoordinator %s: %w", group, err)
	}
	u.mu.Lock()
	u.known[group] = cachedNode{node: node, at: time.Now()}
	u.mu.Unlock()
	return node, nil
}
