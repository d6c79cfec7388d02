package kfakegroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerOptions configures one consumer that a Rig starts. Zero values
// pick defaults short enough for tests that finish in a few seconds.
type ConsumerOptions struct {
	// Balancers are the assignors the member offers, in preference order.
	// Default: range.
	Balancers []kgo.GroupBalancer
	// Rack is sent with kgo.Rack (subscription metadata v3) when set.
	Rack string
	// InstanceID makes the member static (KIP-345) when set.
	InstanceID string
	// SessionTimeout defaults to 3 s, HeartbeatInterval to 100 ms and
	// RebalanceTimeout to 5 s.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// Extra options are appended last, so they override the rig's.
	Extra []kgo.Opt
}

// Rig runs kgo consumers of one group against a cluster and records into a
// Ledger what each was assigned and what it consumed.
type Rig struct {
	seeds  []string
	group  string
	topics []string
	ledger *Ledger
	log    *slog.Logger

	mu        sync.Mutex
	consumers map[string]*Consumer
}

// NewRig returns a rig for consumers of group that subscribe to topics on
// the cluster at seeds. A nil log discards the consumers' logs.
func NewRig(seeds []string, group string, topics []string, log *slog.Logger) *Rig {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rig{
		seeds:     slices.Clone(seeds),
		group:     group,
		topics:    slices.Clone(topics),
		ledger:    NewLedger(),
		log:       log,
		consumers: make(map[string]*Consumer),
	}
}

// Ledger returns the rig's record of production, consumption and partition
// callbacks.
func (r *Rig) Ledger() *Ledger { return r.ledger }

// Consumer is one kgo group member started by a Rig. It polls until it is
// stopped, recording every record it receives, and commits what it polled
// in its revoke callback, on a timer, and when it leaves.
type Consumer struct {
	name   string
	rig    *Rig
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// connMu guards the client's connections and the crashed flag, which
	// let Crash cut the member off as a dead process would be.
	connMu  sync.Mutex
	conns   []net.Conn
	crashed bool
}

// Start starts a consumer called name (the name keys the ledger; it is not
// the member id). It returns once the client is created; use WaitFor with
// Ledger.Owned or Consumer.Joined to wait for it to join.
func (r *Rig) Start(name string, o ConsumerOptions) (*Consumer, error) {
	r.mu.Lock()
	if _, dup := r.consumers[name]; dup {
		r.mu.Unlock()
		return nil, fmt.Errorf("kfakegroup: consumer %q already running", name)
	}
	c := &Consumer{name: name, rig: r, done: make(chan struct{})}
	r.consumers[name] = c
	r.mu.Unlock()

	balancers := o.Balancers
	if len(balancers) == 0 {
		balancers = []kgo.GroupBalancer{kgo.RangeBalancer()}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.seeds...),
		kgo.Dialer(c.dial),
		kgo.ClientID("kfakegroup-" + name),
		kgo.ConsumerGroup(r.group),
		kgo.ConsumeTopics(r.topics...),
		kgo.Balancers(balancers...),
		kgo.SessionTimeout(orDefault(o.SessionTimeout, 3*time.Second)),
		kgo.HeartbeatInterval(orDefault(o.HeartbeatInterval, 100*time.Millisecond)),
		kgo.RebalanceTimeout(orDefault(o.RebalanceTimeout, 5*time.Second)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		// Records are counted before the member may rebalance, and the
		// revoke callback commits everything counted, so a clean
		// rebalance delivers each record once.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			c.event(cl, Assigned, m)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			c.event(cl, Revoked, m)
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				r.log.Warn("commit on revoke failed", "consumer", name, "err", err)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			c.event(cl, Lost, m)
		}),
		kgo.WithLogger(kgo.BasicLogger(slogWriter{r.log.With("consumer", name)}, kgo.LogLevelInfo, nil)),
	}
	if o.Rack != "" {
		opts = append(opts, kgo.Rack(o.Rack))
	}
	if o.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(o.InstanceID))
	}
	opts = append(opts, o.Extra...)

	cl, err := kgo.NewClient(opts...)
	if err != nil {
		r.forget(c)
		return nil, fmt.Errorf("kfakegroup: start consumer %q: %w", name, err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.poll(ctx)
	return c, nil
}

// Consumers returns the running consumers by name.
func (r *Rig) Consumers() map[string]*Consumer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.consumers)
}

// Close makes every running consumer leave, as Consumer.Leave does.
func (r *Rig) Close(ctx context.Context) error {
	var errs []error
	for _, c := range r.Consumers() {
		errs = append(errs, c.Leave(ctx))
	}
	return errors.Join(errs...)
}

func (r *Rig) forget(c *Consumer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.consumers[c.name] == c {
		delete(r.consumers, c.name)
	}
}

// Name returns the rig's name for the consumer.
func (c *Consumer) Name() string { return c.name }

// Client returns the consumer's kgo client, for requests a test sends by
// hand (for example a commit with a stale generation).
func (c *Consumer) Client() *kgo.Client { return c.cl }

// Joined reports the member id and generation kgo currently holds; the
// generation is -1 until the first join completes.
func (c *Consumer) Joined() (memberID string, generation int32) {
	return c.cl.GroupMetadata()
}

// Leave stops polling, commits what was polled, and closes the client, which
// sends LeaveGroup unless the member is static. Records polled before Leave
// count as consumed. It is safe to call more than once.
func (c *Consumer) Leave(ctx context.Context) error {
	var err error
	c.once.Do(func() {
		c.stopPolling()
		if cerr := c.cl.CommitUncommittedOffsets(ctx); cerr != nil {
			err = fmt.Errorf("kfakegroup: final commit of consumer %q: %w", c.name, cerr)
		}
		c.cl.Close()
		c.rig.forget(c)
	})
	return err
}

// Abandon stops polling and closes the client without committing. For a
// static member this is a restart or a crash as the group sees it: kgo does
// not send LeaveGroup for a static member. Records polled but not committed
// may be delivered again to the next owner.
func (c *Consumer) Abandon() {
	c.once.Do(func() {
		c.stopPolling()
		c.cl.Close()
		c.rig.forget(c)
	})
}

// Crash cuts the member off the cluster at once, as a killed process would
// be: its connections close, new ones fail, so it neither commits nor sends
// LeaveGroup, and the coordinator only learns of it through the session
// timeout. Records it polled since its last commit will be delivered again,
// so check delivery with AllConsumedAtLeastOnce afterwards.
func (c *Consumer) Crash() {
	c.connMu.Lock()
	c.crashed = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
	c.connMu.Unlock()
	c.Abandon()
}

// errCrashed is what a crashed member's dials fail with.
var errCrashed = errors.New("kfakegroup: consumer crashed")

func (c *Consumer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.crashed {
		_ = conn.Close()
		return nil, errCrashed
	}
	c.conns = append(c.conns, conn)
	return conn, nil
}

func (c *Consumer) stopPolling() {
	c.cancel()
	<-c.done
}

func (c *Consumer) poll(ctx context.Context) {
	defer close(c.done)
	for {
		fs := c.cl.PollRecords(ctx, 1000)
		// Count whatever came back, even from a poll that Leave cut
		// short: kgo treats returned records as polled, and Leave
		// commits polled offsets.
		fs.EachError(func(t string, p int32, err error) {
			c.rig.log.Debug("fetch error", "consumer", c.name, "topic", t, "partition", p, "err", err)
		})
		fs.EachRecord(func(rec *kgo.Record) {
			c.rig.ledger.AddConsumed(c.name, RecordID{rec.Topic, rec.Partition, rec.Offset})
		})
		if ctx.Err() != nil || fs.IsClientClosed() {
			c.cl.AllowRebalance()
			return
		}
		c.cl.AllowRebalance()
	}
}

func (c *Consumer) event(cl *kgo.Client, kind EventKind, m map[string][]int32) {
	id, gen := cl.GroupMetadata()
	var tps []TopicPartition
	for t, ps := range m {
		for _, p := range ps {
			tps = append(tps, TopicPartition{t, p})
		}
	}
	c.rig.ledger.AddEvent(Event{
		At: time.Now(), Member: c.name, MemberID: id, Generation: gen,
		Kind: kind, Partitions: tps,
	})
}

// Produce writes n records to topic, spread over its partitions round-robin,
// and records each acknowledged one in the rig's ledger.
func (r *Rig) Produce(ctx context.Context, topic string, n int) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(r.seeds...),
		kgo.ClientID("kfakegroup-producer"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		return fmt.Errorf("kfakegroup: start producer: %w", err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}
	}
	res := cl.ProduceSync(ctx, recs...)
	for _, pr := range res {
		if pr.Err == nil {
			r.ledger.AddProduced(RecordID{pr.Record.Topic, pr.Record.Partition, pr.Record.Offset})
		}
	}
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("kfakegroup: produce %d records to %s: %w", n, topic, err)
	}
	return nil
}

// WaitFor calls check every 10 ms until it returns nil, and returns nil; if
// ctx ends first it returns check's last error, so a timed-out test says
// which condition was not met.
func WaitFor(ctx context.Context, check func() error) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kfakegroup: condition not met before %w: %w", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// AllConsumed returns a check for WaitFor that passes once every produced
// record has been consumed at least once.
func AllConsumed(l *Ledger) func() error {
	return func() error {
		p, c := l.Counts()
		if c < p {
			return fmt.Errorf("consumed %d of %d records", c, p)
		}
		return AllConsumedAtLeastOnce(l)
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// slogWriter carries kgo's log lines into slog.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Debug(string(p))
	return len(p), nil
}

// Commit is one hand-made OffsetCommit, for tests of commit fencing.
type Commit struct {
	MemberID   string
	Generation int32
	InstanceID string // empty means none
	Offsets    map[TopicPartition]int64
}

// CommitAs sends cm for the rig's group through c's client and returns
// each partition's outcome: nil if accepted, else the Kafka error. Coordinator
// tests use it to check fencing, for example that a stale generation is
// refused. Topic ids are looked up first, since kgo sends OffsetCommit v10,
// which names topics by id.
func (c *Consumer) CommitAs(ctx context.Context, cm Commit) (map[TopicPartition]error, error) {
	ids, err := c.topicIDs(ctx, cm.Offsets)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = c.rig.group, cm.MemberID, cm.Generation
	if cm.InstanceID != "" {
		req.InstanceID = kmsg.StringPtr(cm.InstanceID)
	}
	byTopic := make(map[string][]int32)
	for tp := range cm.Offsets {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = t, ids[t]
		for _, p := range slices.Sorted(slices.Values(byTopic[t])) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, cm.Offsets[TopicPartition{t, p}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("kfakegroup: OffsetCommit as %q gen %d: %w", cm.MemberID, cm.Generation, err)
	}
	names := make(map[[16]byte]string, len(ids))
	for t, id := range ids {
		names[id] = t
	}
	out := make(map[TopicPartition]error)
	for _, rt := range resp.Topics {
		t := rt.Topic
		if t == "" {
			t = names[rt.TopicID]
		}
		for _, rp := range rt.Partitions {
			out[TopicPartition{t, rp.Partition}] = kerr.ErrorForCode(rp.ErrorCode)
		}
	}
	return out, nil
}

func (c *Consumer) topicIDs(ctx context.Context, offsets map[TopicPartition]int64) (map[string][16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	seen := make(map[string]bool)
	for tp := range offsets {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(tp.Topic)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("kfakegroup: look up topic ids: %w", err)
	}
	ids := make(map[string][16]byte)
	for _, t := range resp.Topics {
		if t.Topic != nil {
			ids[*t.Topic] = t.TopicID
		}
	}
	return ids, nil
}
