package loadtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Phases of a run, as the members see them.
const (
	phaseJoin int32 = iota
	phaseSteady
	phaseDone
)

const (
	// sampleEvery is the memory sampling period of a target process.
	sampleEvery = 250 * time.Millisecond
	// connectWorkers bounds the members connecting at once: ten thousand
	// simultaneous dials overflow a listener's accept backlog, and the
	// retransmitted SYNs would be measured as a slow target.
	connectWorkers = 128
	// topicWait bounds how long created topics may take to show up in
	// Metadata with a leader for every partition.
	topicWait = 30 * time.Second
	// drainWait is how long answers to the steady phase's last requests
	// may take to count after it ends.
	drainWait = 250 * time.Millisecond
	// stopWait bounds the members' leaving at the end.
	stopWait = 5 * time.Second
)

// hooks let tests act inside a run.
type hooks struct {
	// steady runs once every group is stable, before the steady phase.
	steady func(*run)
}

// run is one target's run.
type run struct {
	cfg    Config
	target Target
	addr   string
	log    *slog.Logger
	hooks  hooks

	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{} // closed when members must leave

	topics     []string
	partitions map[string]int32 // read-only once members start
	groups     []string
	tracker    *tracker
	members    []*member
	wg         sync.WaitGroup

	poolsMu sync.Mutex
	pools   map[string]*pool
	// conns are the members' own connections, closed at the end.
	connsMu sync.Mutex
	conns   map[*conn]struct{}

	phase     atomic.Int32
	firstJoin atomic.Int64 // unix nanoseconds of the first JoinGroup

	hbLat, commitLat                                     *histogram
	hbOffered, hbAnswered, commitOffered, commitAnswered atomic.Int64
	steadyJoins, revocations                             atomic.Int64

	errMu sync.Mutex
	errs  map[string]map[string]int64

	fatalMu sync.Mutex
	fatal   error
}

// Run puts cfg's load on target and measures it. It returns an error,
// naming the target, when the run could not be carried out: the target is
// unreachable, lacks the topics, or answered with an error no consumer
// carries on after. A target that does not become stable within
// cfg.StableTimeout is no error: its Result says so.
func Run(ctx context.Context, cfg Config, target Target, log *slog.Logger) (*Result, error) {
	return runWith(ctx, cfg, target, log, hooks{})
}

// Probe dials target and asks its API versions, so that an unreachable
// target is reported, naming it, before any load runs. The embedded kfake
// needs no probe.
func Probe(ctx context.Context, t Target, timeout time.Duration) error {
	if t.Embedded {
		return nil
	}
	c, err := dial(ctx, t.Addr, kmsg.StringPtr("loadtest-probe"), timeout, false)
	if err != nil {
		return fmt.Errorf("target %s (%s): %w", t.Name, t.Addr, err)
	}
	c.close()
	return nil
}

func runWith(ctx context.Context, cfg Config, target Target, log *slog.Logger, h hooks) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &run{
		cfg: cfg, target: target, addr: target.Addr, log: log.With("target", target.Name), hooks: h,
		stop:      make(chan struct{}),
		pools:     map[string]*pool{},
		conns:     map[*conn]struct{}{},
		hbLat:     new(histogram),
		commitLat: new(histogram),
		errs:      map[string]map[string]int64{},
		tracker:   newTracker(cfg.Groups, cfg.Members),
	}
	r.ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()
	for i := range cfg.Topics {
		r.topics = append(r.topics, cfg.TopicPrefix+strconv.Itoa(i))
	}
	for i := range cfg.Groups {
		r.groups = append(r.groups, cfg.GroupPrefix+strconv.Itoa(i))
	}
	res, err := r.execute()
	if err != nil {
		return nil, fmt.Errorf("target %s (%s): %w", target.Name, target.Where(), err)
	}
	return res, nil
}

func (r *run) execute() (*Result, error) {
	cfg := &r.cfg
	pid := r.target.PID
	if r.target.Embedded {
		kp, err := StartKfake(r.ctx, r.topics, cfg.Partitions)
		if err != nil {
			return nil, err
		}
		defer kp.Stop()
		r.addr, pid = kp.Addr(), kp.Pid()
	}
	var smp *sampler
	var cpuStart time.Duration
	if pid > 0 {
		smp = startSampler(pid, sampleEvery)
		defer smp.finish() // for the failures; a result has taken its figures already
		cpuStart = smp.sample()
	}

	boot, err := dial(r.ctx, r.addr, kmsg.StringPtr("loadtest-admin"), cfg.DialTimeout, false)
	if err != nil {
		return nil, err
	}
	err = r.ensureTopics(boot)
	boot.close()
	if err != nil {
		return nil, err
	}

	res := &Result{
		Target: r.target.Name, Address: r.target.Where(), Embedded: r.target.Embedded,
		Groups: cfg.Groups, MembersPerGroup: cfg.Members, Members: cfg.TotalMembers(),
		Protocol: cfg.Protocol, SharedConnections: cfg.SharedConnections,
		Errors: map[string]map[string]int64{},
	}
	for _, n := range r.partitions {
		res.Partitions += int(n)
	}
	r.log.Info("connecting", "members", cfg.TotalMembers(), "address", r.addr)
	start := time.Now()
	if err := r.connectAll(); err != nil {
		r.shutdown()
		return nil, err
	}
	res.Connect = time.Since(start)
	r.log.Info("joining", "connect", res.Connect.Round(time.Millisecond))

	sched := newScheduler(r)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		sched.loop()
	}()
	for _, m := range r.members {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := m.loop(); err != nil {
				r.abort(err)
			}
		}()
	}
	since, stable, err := r.waitStable()
	if err != nil {
		r.shutdown()
		return nil, err
	}
	if !stable {
		res.UnstableGroups, res.Unstable = r.tracker.unstable(r.groups, 5)
		res.Revocations = r.revocations.Load()
		r.log.Warn("not stable", "timeout", cfg.StableTimeout, "unstable_groups", res.UnstableGroups)
		r.shutdown()
		r.finish(res, smp, cpuStart)
		return res, nil
	}
	res.Stable = true
	res.JoinToStable = since.Sub(time.Unix(0, r.firstJoin.Load()))
	res.Assignment = r.checkAssignments(&res.assignments)
	r.log.Info("stable", "join_to_stable", res.JoinToStable.Round(time.Millisecond))
	if r.hooks.steady != nil {
		r.hooks.steady(r)
	}

	var cpuA time.Duration
	if smp != nil {
		cpuA = smp.sample()
	}
	genA := selfCPU()
	r.phase.Store(phaseSteady)
	steadyStart := time.Now()
	t := time.NewTimer(cfg.Duration)
	select {
	case <-t.C:
	case <-r.ctx.Done():
	}
	t.Stop()
	r.phase.Store(phaseDone)
	res.Steady = time.Since(steadyStart)
	var cpuB time.Duration
	if smp != nil {
		cpuB = smp.sample()
	}
	genB := selfCPU()
	if err := r.fatalErr(); err != nil {
		r.shutdown()
		return nil, err
	}
	time.Sleep(drainWait)
	if _, ok := r.tracker.stableFor(time.Now(), 0); ok {
		end := r.checkAssignments(&res.assignments)
		res.AssignmentAtEnd = &end
	}
	r.shutdown()

	res.HeartbeatsOffered, res.HeartbeatsAnswered = r.hbOffered.Load(), r.hbAnswered.Load()
	res.CommitsOffered, res.CommitsAnswered = r.commitOffered.Load(), r.commitAnswered.Load()
	res.HeartbeatsOfferedPerSec = rate(res.HeartbeatsOffered, res.Steady)
	res.HeartbeatsAnsweredPerSec = rate(res.HeartbeatsAnswered, res.Steady)
	res.CommitsOfferedPerSec = rate(res.CommitsOffered, res.Steady)
	res.CommitsAnsweredPerSec = rate(res.CommitsAnswered, res.Steady)
	res.Heartbeat, res.Commit = r.hbLat.summary(), r.commitLat.summary()
	res.SteadyJoins = r.steadyJoins.Load()
	res.Revocations = r.revocations.Load()
	if res.HeartbeatsAnswered > 0 {
		res.GeneratorCPUPerHeartbeat = perHeartbeat(genB-genA, res.HeartbeatsAnswered)
	}
	r.finish(res, smp, cpuStart)
	if res.Process != nil && res.HeartbeatsAnswered > 0 {
		res.Process.SteadyCPUSeconds = (cpuB - cpuA).Seconds()
		res.Process.CPUPerHeartbeat = perHeartbeat(cpuB-cpuA, res.HeartbeatsAnswered)
	}
	r.log.Info("done", "heartbeats_answered", res.HeartbeatsAnswered, "heartbeat_p99", res.Heartbeat.P99)
	return res, nil
}

func perHeartbeat(cpu time.Duration, n int64) float64 {
	return float64(cpu.Microseconds()) / float64(n)
}

// finish fills in the error counts and the process figures.
func (r *run) finish(res *Result, smp *sampler, cpuStart time.Duration) {
	r.errMu.Lock()
	for api, codes := range r.errs {
		res.Errors[api] = codes
	}
	r.errMu.Unlock()
	if smp == nil {
		return
	}
	cpuEnd := smp.sample()
	rss, pss, procs, err := smp.finish()
	p := &Process{PID: smp.pid,
		CPUSeconds: (cpuEnd - cpuStart).Seconds(), PeakRSS: rss, PeakProcesses: procs}
	if pss > 0 {
		p.PeakPSS = pss
	}
	if n := r.cfg.TotalMembers(); n > 0 {
		p.RSSPer1000Members = rss * 1000 / int64(n)
		p.PSSPer1000Members = p.PeakPSS * 1000 / int64(n)
	}
	if err != nil {
		p.SampleError = err.Error()
	}
	res.Process = p
}

// ensureTopics learns the topics' partition counts, creating the missing
// topics first when the configuration says so.
func (r *run) ensureTopics(boot *conn) error {
	md, err := r.metadata(boot)
	if err != nil {
		return err
	}
	missing := r.missingTopics(md)
	if len(missing) > 0 {
		if !r.cfg.CreateTopics {
			return fmt.Errorf("topics %v do not exist, and --create-topics is off", missing)
		}
		if err := r.createTopics(boot, md, missing); err != nil {
			return err
		}
		deadline := time.Now().Add(topicWait)
		for {
			if md, err = r.metadata(boot); err != nil {
				return err
			}
			if missing = r.missingTopics(md); len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("topics %v created but not ready after %v", missing, topicWait)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	r.partitions = map[string]int32{}
	for _, t := range md.Topics {
		if t.Topic != nil && slices.Contains(r.topics, *t.Topic) {
			r.partitions[*t.Topic] = int32(len(t.Partitions))
		}
	}
	return nil
}

func (r *run) metadata(cn *conn) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range r.topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp, err := cn.roundTrip(r.ctx, req, requestTimeout)
	if err != nil {
		return nil, fmt.Errorf("Metadata: %w", err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// missingTopics lists the topics that are absent, or not yet led on every
// partition.
func (r *run) missingTopics(md *kmsg.MetadataResponse) []string {
	ready := map[string]bool{}
	for _, t := range md.Topics {
		if t.Topic == nil || t.ErrorCode != 0 || len(t.Partitions) == 0 {
			continue
		}
		led := true
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				led = false
			}
		}
		ready[*t.Topic] = led
	}
	var missing []string
	for _, t := range r.topics {
		if !ready[t] {
			missing = append(missing, t)
		}
	}
	return missing
}

// createTopics sends CreateTopics to the controller Metadata names.
func (r *run) createTopics(boot *conn, md *kmsg.MetadataResponse, topics []string) error {
	cn := boot
	for _, b := range md.Brokers {
		if b.NodeID != md.ControllerID {
			continue
		}
		if addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); addr != boot.addr {
			c, err := dial(r.ctx, addr, boot.clientID, r.cfg.DialTimeout, false)
			if err != nil {
				return fmt.Errorf("CreateTopics: the controller, node %d: %w", b.NodeID, err)
			}
			defer c.close()
			cn = c
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(topicWait.Milliseconds())
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t, r.cfg.Partitions, -1 // -1: the broker's default (KIP-464)
		req.Topics = append(req.Topics, rt)
	}
	if cn.versions[kmsg.CreateTopics] < 4 {
		for i := range req.Topics {
			req.Topics[i].ReplicationFactor = 1
		}
	}
	resp, err := cn.roundTrip(r.ctx, req, topicWait+requestTimeout)
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
		switch err := kerr.ErrorForCode(t.ErrorCode); err {
		case nil, kerr.TopicAlreadyExists:
		default:
			msg := ""
			if t.ErrorMessage != nil {
				msg = ": " + *t.ErrorMessage
			}
			return fmt.Errorf("CreateTopics %s: %s%s", t.Topic, codeName(t.ErrorCode), msg)
		}
	}
	r.log.Info("created topics", "topics", topics)
	return nil
}

// connectAll creates the members and connects each to its coordinator,
// connectWorkers at a time; the first failure ends the run.
func (r *run) connectAll() error {
	for g := range r.cfg.Groups {
		for i := range r.cfg.Members {
			r.members = append(r.members, newMember(r, g, i))
		}
	}
	work := make(chan *member)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	// A target that keeps answering COORDINATOR_NOT_AVAILABLE would keep
	// its members looking for ever; the stable timeout bounds this phase
	// too.
	bound := time.AfterFunc(r.cfg.StableTimeout, func() {
		r.abort(fmt.Errorf("not every member found its coordinator within --stable-timeout %v", r.cfg.StableTimeout))
	})
	defer bound.Stop()
	for range min(connectWorkers, len(r.members)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				if err := m.connect(false); err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("group %s member %d: connect: %w", m.group, m.i, err)
						cancel()
					})
				}
			}
		}()
	}
feed:
	for _, m := range r.members {
		select {
		case work <- m:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := r.fatalErr(); err != nil {
		return err
	}
	if firstErr == nil && r.ctx.Err() != nil {
		firstErr = r.ctx.Err()
	}
	return firstErr
}

// connTo returns a connection to addr for the member in slot: one of its
// own, or, when connections are shared, the pool's slot % N.
func (r *run) connTo(ctx context.Context, addr string, slot int, clientID *string) (*conn, error) {
	if r.cfg.SharedConnections == 0 {
		return r.dialOwn(ctx, addr, clientID)
	}
	r.poolsMu.Lock()
	p, ok := r.pools[addr]
	if !ok {
		p = &pool{addr: addr, conns: make([]*conn, r.cfg.SharedConnections)}
		r.pools[addr] = p
	}
	r.poolsMu.Unlock()
	return p.get(ctx, slot%r.cfg.SharedConnections, kmsg.StringPtr("loadtest-shared"), r.cfg.DialTimeout)
}

// dialOwn dials a connection for one member, closed at the run's end if
// not before.
func (r *run) dialOwn(ctx context.Context, addr string, clientID *string) (*conn, error) {
	c, err := dial(ctx, addr, clientID, r.cfg.DialTimeout, false)
	if err != nil {
		return nil, err
	}
	r.connsMu.Lock()
	r.conns[c] = struct{}{}
	r.connsMu.Unlock()
	return c, nil
}

// closeOwn closes a connection dialOwn opened.
func (r *run) closeOwn(c *conn) {
	c.close()
	r.connsMu.Lock()
	delete(r.conns, c)
	r.connsMu.Unlock()
}

// release gives up a connection connTo returned: closed when it was the
// member's own, left to the others when shared.
func (r *run) release(cn *conn) {
	if r.cfg.SharedConnections == 0 {
		r.closeOwn(cn)
	}
}

// waitStable waits until every group has been stable for the hold time,
// and returns when that state began. It gives up after the stable
// timeout, counted from the first JoinGroup.
func (r *run) waitStable() (since time.Time, stable bool, err error) {
	hold := r.cfg.hold()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(r.cfg.StableTimeout)
	for {
		select {
		case <-r.ctx.Done():
			if err := r.fatalErr(); err != nil {
				return time.Time{}, false, err
			}
			return time.Time{}, false, r.ctx.Err()
		case now := <-tick.C:
			if since, ok := r.tracker.stableFor(now, hold); ok {
				return since, true, nil
			}
			if first := r.firstJoin.Load(); first != 0 {
				deadline = time.Unix(0, first).Add(r.cfg.StableTimeout)
			}
			if now.After(deadline) {
				return time.Time{}, false, nil
			}
		}
	}
}

// checkAssignments checks every group's current assignment, keeping the
// members' assignments in into.
func (r *run) checkAssignments(into *[][][]kmsg.ConsumerMemberAssignmentTopic) AssignmentCheck {
	all := r.tracker.assignments()
	*into = all
	check := AssignmentCheck{Groups: len(all)}
	for g, members := range all {
		if err := checkCoverage(r.partitions, members); err != nil {
			if len(check.Problems) < 5 {
				check.Problems = append(check.Problems, fmt.Sprintf("%s: %v", r.groups[g], err))
			}
			continue
		}
		check.Valid++
	}
	return check
}

// shutdown asks the members to leave their groups, waits for them a
// little, and closes every connection.
func (r *run) shutdown() {
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopWait):
	}
	// Whatever has not left by now is cut off: cancelling ends every
	// wait, and closing the connections every write to a target that
	// stopped reading.
	r.cancel()
	r.connsMu.Lock()
	for c := range r.conns {
		c.close()
	}
	r.connsMu.Unlock()
	r.poolsMu.Lock()
	for _, p := range r.pools {
		p.closeAll()
	}
	r.poolsMu.Unlock()
	r.wg.Wait()
}

// abort ends the run with err, the first a member could not carry on
// after.
func (r *run) abort(err error) {
	r.fatalMu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	r.fatalMu.Unlock()
	r.cancel()
}

func (r *run) fatalErr() error {
	r.fatalMu.Lock()
	defer r.fatalMu.Unlock()
	return r.fatal
}

func (r *run) inSteady() bool { return r.phase.Load() == phaseSteady }

// noteJoin records a JoinGroup about to be sent.
func (r *run) noteJoin() {
	if r.firstJoin.Load() == 0 {
		r.firstJoin.CompareAndSwap(0, time.Now().UnixNano())
	}
	if r.inSteady() {
		r.steadyJoins.Add(1)
	}
}

// count records an error code in an answer to key; zero is no error.
func (r *run) count(key, code int16) {
	if code != 0 {
		r.countName(key, codeName(code))
	}
}

// countTransport records a request of key whose connection failed.
func (r *run) countTransport(key int16) { r.countName(key, "connection lost") }

func (r *run) countName(key int16, name string) {
	select {
	case <-r.stop:
		// Once the members stop, a heartbeat the scheduler had under way
		// may reach the target after its member's LeaveGroup: its
		// UNKNOWN_MEMBER_ID says nothing of the target.
		return
	default:
	}
	api := kmsg.NameForKey(key)
	r.errMu.Lock()
	defer r.errMu.Unlock()
	codes := r.errs[api]
	if codes == nil {
		codes = map[string]int64{}
		r.errs[api] = codes
	}
	codes[name]++
}
