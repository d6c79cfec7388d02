// Package kfakegroup lets tests drive a group coordinator with real franz-go
// consumers: a Bridge routes the consumer-group requests that a kfake
// cluster receives to a GroupHandler, and a Rig runs kgo consumers against
// that cluster and records what they were assigned and what they consumed.
//
// A coordinator test typically reads:
//
//	b, _ := kfakegroup.NewBridge(handler, append(kfakegroup.FastKfakeOpts(),
//		kfake.NumBrokers(2), kfake.SeedTopics(6, "events")))
//	defer b.Close()
//	rig := kfakegroup.NewRig(b.Addrs(), "group", []string{"events"}, nil)
//	defer rig.Close(ctx)
//	rig.Produce(ctx, "events", 300)
//	rig.Start("a", kfakegroup.ConsumerOptions{Rack: "r1"})
//	kfakegroup.WaitFor(ctx, kfakegroup.AllConsumed(rig.Ledger()))
//	err := kfakegroup.AllConsumedOnce(rig.Ledger())
//
// It is test infrastructure. Only tests import it; production packages must
// never import it, and it imports no wasmassign package itself, so that the
// coordinator's and the gateway's tests can both use it.
package kfakegroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupHandler answers the group requests of the groups it manages, in place
// of kfake's own group coordinator.
type GroupHandler interface {
	// Manages reports whether requests for group go to the handler. It is
	// called on kfake's request loop, so it must answer at once.
	Manages(group string) bool

	// Handle answers a JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
	// DescribeGroups or ListGroups request. It may block (JoinGroup and
	// SyncGroup wait for the rebalance) but must return once ctx is done.
	// A non-nil error closes the client's connection, as a broker does with
	// a request it cannot answer.
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)

	// FenceCommit checks an OffsetCommit's generation, member and instance
	// against the group. Returning nil accepts it: the bridge then lets
	// kfake store the offsets as a simple commit (generation -1, no member,
	// no instance), which kfake accepts because it never sees the group's
	// members. A *kerr.Error refuses the commit with that code on every
	// partition; any other error closes the client's connection.
	FenceCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) error
}

// ErrNoResponse is returned (and the client's connection closed) when a
// GroupHandler answers a request with neither a response nor an error.
var ErrNoResponse = errors.New("kfakegroup: handler returned no response")

// routedKeys are the request keys the bridge inspects. FindCoordinator is
// not among them: kfake's answer names a broker, and the bridge intercepts
// group requests on every broker, so any answer works.
var routedKeys = []kmsg.Key{
	kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup,
	kmsg.DescribeGroups, kmsg.ListGroups, kmsg.OffsetCommit, kmsg.OffsetFetch,
}

// Bridge routes a kfake cluster's group requests for managed groups to a
// GroupHandler. Requests for other groups fall through to kfake.
//
// What it does per request key, for a managed group:
//   - JoinGroup, SyncGroup, Heartbeat, LeaveGroup: the handler answers.
//   - DescribeGroups: the handler answers the whole request if it names any
//     managed group. ListGroups: the handler always answers, so groups that
//     only kfake runs are not listed.
//   - OffsetCommit: the handler fences it; kfake stores an accepted one.
//   - OffsetFetch: kfake answers once it holds a commit for the group;
//     before that the bridge answers "no offset" (-1) per partition.
//   - Anything else (DeleteGroups, OffsetDelete, TxnOffsetCommit,
//     FindCoordinator) goes to kfake, which sees the managed group as
//     memberless.
//
// Every handler call runs through kfake's SleepControl, off kfake's request
// loop: a JoinGroup parked for its rebalance holds only its own connection.
type Bridge struct {
	cluster *kfake.Cluster
	handler GroupHandler
	owned   bool
	log     *slog.Logger

	// ctx is every handler call's context; Close cancels it so that calls
	// blocked in a rebalance return before the cluster goes away.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	routed map[kmsg.Key]int
	closed bool
}

// BridgeOption configures a Bridge.
type BridgeOption func(*Bridge)

// WithLogger makes the bridge log each routed request at debug level and
// handler failures at warn level.
func WithLogger(l *slog.Logger) BridgeOption {
	return func(b *Bridge) { b.log = l }
}

// NewBridge starts a kfake cluster with kfakeOpts and routes its managed
// group requests to h. Close shuts the cluster down.
func NewBridge(h GroupHandler, kfakeOpts []kfake.Opt, opts ...BridgeOption) (*Bridge, error) {
	c, err := kfake.NewCluster(kfakeOpts...)
	if err != nil {
		return nil, fmt.Errorf("kfakegroup: start kfake cluster: %w", err)
	}
	b := Attach(c, h, opts...)
	b.owned = true
	return b, nil
}

// Attach routes an existing cluster's managed group requests to h. Close
// stops routing but leaves the cluster running.
func Attach(c *kfake.Cluster, h GroupHandler, opts ...BridgeOption) *Bridge {
	b := &Bridge{
		cluster: c,
		handler: h,
		log:     slog.New(slog.DiscardHandler),
		routed:  make(map[kmsg.Key]int),
	}
	for _, o := range opts {
		o(b)
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	for _, k := range routedKeys {
		c.ControlKey(int16(k), b.control)
	}
	return b
}

// FastKfakeOpts returns kfake options that let groups kfake runs itself
// accept the short session timeouts the Rig uses (kfake's default minimum
// is 6 s). kfake has no initial rebalance delay to shorten.
func FastKfakeOpts() []kfake.Opt {
	return []kfake.Opt{kfake.GroupMinSessionTimeout(100 * time.Millisecond)}
}

// Cluster returns the kfake cluster, for topic administration and for
// options the bridge does not wrap.
func (b *Bridge) Cluster() *kfake.Cluster { return b.cluster }

// Addrs returns the cluster's listen addresses, to use as seed brokers.
func (b *Bridge) Addrs() []string { return b.cluster.ListenAddrs() }

// Routed returns how many requests with key the bridge has sent to the
// handler (fenced commits included, unmanaged groups excluded). Tests use
// it to check, for example, that a static restart sent no JoinGroup.
func (b *Bridge) Routed(key kmsg.Key) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.routed[key]
}

// Close cancels every handler call in progress, stops routing, and shuts the
// cluster down if NewBridge started it.
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	if b.owned {
		b.cluster.Close()
	}
}

// control is the kfake control function for every routed key. It runs on
// its own goroutine while kfake's request loop waits for it, so it decides
// quickly and moves anything that can block into await.
func (b *Bridge) control(req kmsg.Request) (kmsg.Response, error, bool) {
	b.cluster.KeepControl()
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		b.cluster.DropControl()
		return nil, nil, false
	}

	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		if !b.handler.Manages(r.Group) {
			return nil, nil, false
		}
		return b.fenceCommit(r)
	case *kmsg.OffsetFetchRequest:
		return b.offsetFetch(r)
	case *kmsg.ListGroupsRequest:
		return b.route(req)
	}
	for _, g := range groupsOf(req) {
		if b.handler.Manages(g) {
			return b.route(req)
		}
	}
	return nil, nil, false
}

// route hands req to the handler off kfake's request loop.
func (b *Bridge) route(req kmsg.Request) (kmsg.Response, error, bool) {
	b.count(kmsg.Key(req.Key()))
	var (
		resp kmsg.Response
		err  error
	)
	if !b.await(func(ctx context.Context) { resp, err = b.handler.Handle(ctx, req) }) {
		return nil, errors.New("kfakegroup: cluster closed during the request"), true
	}
	if err == nil && resp == nil {
		err = ErrNoResponse
	}
	if err != nil {
		b.log.Warn("group handler failed; closing the client's connection",
			"key", kmsg.NameForKey(req.Key()), "err", err)
		return nil, fmt.Errorf("kfakegroup: %s: %w", kmsg.NameForKey(req.Key()), err), true
	}
	// The response is encoded with the version it carries; a handler that
	// builds one with kmsg.NewPtr... rather than ResponseKind would
	// otherwise answer at version 0.
	resp.SetVersion(req.GetVersion())
	b.log.Debug("routed group request", "key", kmsg.NameForKey(req.Key()), "version", req.GetVersion())
	return resp, nil, true
}

// fenceCommit asks the handler to fence r. An accepted commit is rewritten
// into a simple commit and handed back to kfake (handled=false), which then
// stores the offsets.
func (b *Bridge) fenceCommit(r *kmsg.OffsetCommitRequest) (kmsg.Response, error, bool) {
	b.count(kmsg.OffsetCommit)
	var ferr error
	if !b.await(func(ctx context.Context) { ferr = b.handler.FenceCommit(ctx, r) }) {
		return nil, errors.New("kfakegroup: cluster closed during the commit"), true
	}
	b.log.Debug("fenced commit", "group", r.Group, "version", r.Version, "generation", r.Generation, "err", ferr)
	if ferr == nil {
		r.Generation = -1
		r.MemberID = ""
		r.InstanceID = nil
		return nil, nil, false
	}
	var ke *kerr.Error
	if !errors.As(ferr, &ke) {
		return nil, fmt.Errorf("kfakegroup: fence OffsetCommit for group %q: %w", r.Group, ferr), true
	}
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = ke.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}

// offsetFetch answers an OffsetFetch for a managed group that kfake has
// never seen (no commit yet) with "no offset" for every partition. kfake
// would answer GROUP_ID_NOT_FOUND, which a broker does not do for a group
// that has members, and on which kgo's join fails.
func (b *Bridge) offsetFetch(r *kmsg.OffsetFetchRequest) (kmsg.Response, error, bool) {
	groups := groupsOf(r)
	if len(groups) != 1 || !b.handler.Manages(groups[0]) {
		return nil, nil, false
	}
	// GroupInfo goes through kfake's admin channel, which the request loop
	// serves while it waits for a control function.
	if b.cluster.GroupInfo(groups[0]) != nil {
		return nil, nil, false
	}
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version <= 7 {
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition = p
				rp.Offset = -1
				rp.LeaderEpoch = -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	}
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = r.Groups[0].Group
	for _, t := range r.Groups[0].Topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition = p
			rp.Offset = -1
			rp.LeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		rg.Topics = append(rg.Topics, rt)
	}
	resp.Groups = append(resp.Groups, rg)
	return resp, nil, true
}

// await runs fn outside kfake's request loop through SleepControl, so that a
// JoinGroup waiting for its rebalance does not stall other connections. It
// reports false if the cluster closed before fn returned; fn's results must
// then not be read, since fn may still be writing them.
func (b *Bridge) await(fn func(ctx context.Context)) bool {
	done := make(chan struct{})
	b.cluster.SleepControl(func() {
		defer close(done)
		fn(b.ctx)
	})
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (b *Bridge) count(k kmsg.Key) {
	b.mu.Lock()
	b.routed[k]++
	b.mu.Unlock()
}

// groupsOf returns the groups a group request names.
func groupsOf(req kmsg.Request) []string {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return []string{r.Group}
	case *kmsg.SyncGroupRequest:
		return []string{r.Group}
	case *kmsg.HeartbeatRequest:
		return []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		return []string{r.Group}
	case *kmsg.DescribeGroupsRequest:
		return r.Groups
	case *kmsg.OffsetCommitRequest:
		return []string{r.Group}
	case *kmsg.OffsetFetchRequest:
		if r.Version <= 7 {
			return []string{r.Group}
		}
		gs := make([]string, 0, len(r.Groups))
		for _, g := range r.Groups {
			gs = append(gs, g.Group)
		}
		return gs
	}
	return nil
}
