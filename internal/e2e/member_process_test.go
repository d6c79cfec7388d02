package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// proc is one client process a test started (kcat, kafkajs, a Python or
// Java consumer): its stdout goes line by line to the parser of its
// protocol, its stderr is kept for the failure log, and it is stopped as
// an operator would stop it.
type proc struct {
	clientID string
	cmd      *exec.Cmd
	stderr   *syncBuffer
	stdout   *syncBuffer // what it printed, for the failure log
	exited   chan struct{}
	// stopWait is how long stop lets the process shut down after SIGTERM
	// before killing it.
	stopWait time.Duration
}

// startProc runs cmd as clientID and hands each line it prints to onLine,
// from one goroutine; onExit, when set, runs once the process has exited
// and all its output was handed over. The test's cleanup stops the
// process, and logs its stderr if the test failed.
func startProc(t *testing.T, clientID string, cmd *exec.Cmd, stopWait time.Duration, onLine func(string), onExit func()) *proc {
	t.Helper()
	p := &proc{clientID: clientID, cmd: cmd, stderr: &syncBuffer{}, stdout: &syncBuffer{}, exited: make(chan struct{}), stopWait: stopWait}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(p.stdout, sc.Text())
			onLine(sc.Text())
		}
		_ = cmd.Wait()
		if onExit != nil {
			onExit()
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			kept := keepLog(t, clientID+"-stderr", p.stderr.String())
			t.Logf("%s (%s) stderr%s:\n%s\nlast lines of its stdout:\n%s", clientID, cmd.Path, keptNote(kept), tail(p.stderr.String(), 20), tail(p.stdout.String(), 10))
		}
	})
	return p
}

// stop ends the process with SIGTERM and waits for it to exit, killing it
// after stopWait.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(p.stopWait):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// crash ends the process with SIGKILL: no commit, no LeaveGroup.
func (p *proc) crash() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// readLog is what a consumer process printed of the records it read.
type readLog struct {
	mu   sync.Mutex
	read map[[2]int64]int // (partition, offset) -> times read
	// strays are records read of partitions the reader did not own at the
	// time, by its own callbacks (only processes that print them).
	strays []string
}

// readLogger is a consumer process with a readLog.
type readLogger interface{ records() *readLog }

func (l *readLog) records() *readLog { return l }

// add counts one record read.
func (l *readLog) add(p, o int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read[[2]int64{p, o}]++
}

// partitions returns the partitions the process printed records of.
func (l *readLog) partitions() []int32 {
	return l.partitionsBetween(nil, nil)
}

// partitionsBetween returns the partitions the process printed records of
// whose offsets lie in [from, to): the partitions it held while those
// records were produced and read. A nil to means no bound.
func (l *readLog) partitionsBetween(from, to map[int32]int64) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int32]bool{}
	for po := range l.read {
		p := int32(po[0])
		if to == nil || po[1] >= from[p] && po[1] < to[p] {
			seen[p] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// reads is every offset the process read, by partition.
func (l *readLog) reads() map[int32][]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32][]int64{}
	for po := range l.read {
		out[int32(po[0])] = append(out[int32(po[0])], po[1])
	}
	for p := range out {
		slices.Sort(out[p])
	}
	return out
}

// readAllOnce waits until the processes together read every offset below
// end, then checks none was read twice and none read while not owned.
func readAllOnce[R readLogger](ctx context.Context, rs []R, end map[int32]int64) error {
	total := int64(0)
	for _, e := range end {
		total += e
	}
	for {
		seen, twice, strays := map[[2]int64]bool{}, []string{}, []string{}
		for _, r := range rs {
			l := r.records()
			l.mu.Lock()
			for po, n := range l.read {
				if seen[po] || n > 1 {
					twice = append(twice, fmt.Sprintf("%d@%d", po[0], po[1]))
				}
				seen[po] = true
			}
			strays = append(strays, l.strays...)
			l.mu.Unlock()
		}
		if len(twice) > 0 {
			return fmt.Errorf("records read more than once: %v", twice)
		}
		if len(strays) > 0 {
			return fmt.Errorf("records read of partitions the reader did not own: %v", strays)
		}
		if int64(len(seen)) == total {
			for po := range seen {
				if po[1] >= end[int32(po[0])] {
					return fmt.Errorf("read %d@%d, beyond the end offsets %v", po[0], po[1], end)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("read %d of %d records before %w", len(seen), total, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readAll waits until the processes together read every offset below end,
// each at least once: after a member gave partitions up, what was read and
// not committed is read again.
func readAll[R readLogger](ctx context.Context, rs []R, end map[int32]int64) error {
	for {
		missing := 0
		for p, e := range end {
			for off := range e {
				if !slices.ContainsFunc(rs, func(r R) bool {
					l := r.records()
					l.mu.Lock()
					defer l.mu.Unlock()
					return l.read[[2]int64{int64(p), off}] > 0
				}) {
					missing++
				}
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d records below the end offsets %v not read before %w", missing, end, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// mustReadAllOnce fails the test unless rs together read every offset
// below end within 30 s, each once (readAllOnce).
func mustReadAllOnce[R readLogger](ctx context.Context, t *testing.T, rs []R, end map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := readAllOnce(ctx, rs, end); err != nil {
		t.Fatal(err)
	}
}

// mustReadAllToEnd is mustReadAllOnce up to topic's current end offsets,
// read through direct.
func mustReadAllToEnd[R readLogger](ctx context.Context, t *testing.T, direct *kgo.Client, topic string, partitions int32, rs []R) {
	t.Helper()
	end, err := endOffsets(ctx, direct, topic, partitions)
	if err != nil {
		t.Fatal(err)
	}
	mustReadAllOnce(ctx, t, rs, end)
}

// procEvent is one rebalance callback a member process printed, or the
// process's exit.
type procEvent struct {
	kind string // assigned, revoked, lost, exit
	// gen is the member's group generation when it printed the callback,
	// -1 when the client does not print it (gen=G).
	gen int32
	// at is the client's clock (t=MICROS) when it prints one, else when
	// the line was read.
	at         time.Time
	partitions []int32
	closing    bool // printed after the member began shutting down
}

// procMember is one consumer process that prints its rebalance callbacks
// and records (testdata/realkafka: Consume.java and the Python scripts):
//
//	assigned|revoked|lost [gen=G] [t=MICROS] topic/p ...
//	topic/p@offset
//	closing
//
// It keeps what the member holds by its own callbacks, every callback, and
// every record it read.
type procMember struct {
	*proc
	readLog
	topic   string
	owned   map[int32]bool // by its own callbacks; guarded by mu
	events  []procEvent
	closing bool
}

// newProcMember is a member of topic with nothing printed yet and no
// process: startProcMember gives it one, the parser's tests none.
func newProcMember(clientID, topic string) *procMember {
	return &procMember{proc: &proc{clientID: clientID, exited: make(chan struct{})}, topic: topic,
		readLog: readLog{read: map[[2]int64]int{}}, owned: map[int32]bool{}}
}

// startProcMember runs cmd, a consumer of topic printing the member
// protocol as clientID, and stops it (SIGTERM, then SIGKILL after 20 s)
// when the test ends.
func startProcMember(t *testing.T, clientID, topic string, cmd *exec.Cmd) *procMember {
	t.Helper()
	m := newProcMember(clientID, topic)
	m.proc = startProc(t, clientID, cmd, 20*time.Second, m.line, func() { m.exit(time.Now()) })
	return m
}

// exit records the process's exit at at: it releases whatever it held.
func (m *procMember) exit(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, procEvent{kind: "exit", gen: -1, at: at, closing: true})
}

// line records one printed line; lines of other topics and anything else
// are ignored.
func (m *procMember) line(s string) {
	prefix := m.topic + "/"
	m.mu.Lock()
	defer m.mu.Unlock()
	f := strings.Fields(s)
	switch {
	case len(f) == 0:
	case f[0] == "closing":
		m.closing = true
	case f[0] == "assigned" || f[0] == "revoked" || f[0] == "lost":
		ev := procEvent{kind: f[0], gen: -1, at: time.Now(), closing: m.closing}
		for _, tok := range f[1:] {
			if g, ok := strings.CutPrefix(tok, "gen="); ok {
				if n, err := strconv.ParseInt(g, 10, 32); err == nil {
					ev.gen = int32(n)
				}
				continue
			}
			if us, ok := strings.CutPrefix(tok, "t="); ok {
				if n, err := strconv.ParseInt(us, 10, 64); err == nil {
					ev.at = time.UnixMicro(n)
				}
				continue
			}
			p, err := strconv.ParseInt(strings.TrimPrefix(tok, prefix), 10, 32)
			if err != nil {
				continue
			}
			ev.partitions = append(ev.partitions, int32(p))
			if f[0] == "assigned" {
				m.owned[int32(p)] = true
			} else {
				delete(m.owned, int32(p))
			}
		}
		m.events = append(m.events, ev)
	case strings.HasPrefix(f[0], prefix):
		ps, os, ok := strings.Cut(strings.TrimPrefix(f[0], prefix), "@")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return
		}
		if !m.owned[int32(p)] {
			m.strays = append(m.strays, f[0])
		}
		m.read[[2]int64{p, o}]++
	}
}

// ownedNow is the sorted set the member holds by its callbacks.
func (m *procMember) ownedNow() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

// mark is the number of events so far, for revokedSince and eventsSince.
func (m *procMember) mark() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

// eventsSince are the callbacks since mark.
func (m *procMember) eventsSince(mark int) []procEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events[mark:])
}

// revokedSince is every partition revoked or lost since mark, except on
// the member's own shutdown.
func (m *procMember) revokedSince(mark int) []int32 {
	var out []int32
	for _, ev := range m.eventsSince(mark) {
		if (ev.kind == "revoked" || ev.kind == "lost") && !ev.closing {
			out = append(out, ev.partitions...)
		}
	}
	return out
}

// memberMarks is every member's mark.
func memberMarks(ms []*procMember) []int {
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = m.mark()
	}
	return out
}

// settledMembers waits until the gateway shows group Stable with exactly
// members, holding all partitions of topic, each member holds by its own
// callbacks exactly what the gateway assigned it, and check, when set,
// passes for every member (x is the gateway's view of m).
func settledMembers(ctx context.Context, d *daemon, group, topic string, partitions int, members []*procMember,
	check func(g adminGroup, x adminMember, m *procMember) error) (adminGroup, error) {
	for {
		g, err := stableWith(ctx, d, group, len(members), topic, partitions)
		if err != nil {
			return g, err
		}
		var last error
		for _, m := range members {
			i := slices.IndexFunc(g.Members, func(x adminMember) bool { return x.ClientID == m.clientID })
			if i < 0 {
				last = fmt.Errorf("%s is not a member: %v", m.clientID, adminAssignment(g))
				break
			}
			want := slices.Sorted(slices.Values(g.Members[i].Assignment[topic]))
			if got := m.ownedNow(); !slices.Equal(got, want) {
				last = fmt.Errorf("%s holds %v by its callbacks; the gateway assigned it %v", m.clientID, got, want)
				break
			}
			if check != nil {
				if last = check(g, g.Members[i], m); last != nil {
					break
				}
			}
		}
		if last == nil {
			return g, nil
		}
		select {
		case <-ctx.Done():
			return g, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkUnmovedKept checks that no member in ms revoked, since marks, a
// partition it holds again now: cooperative members give up only what
// moves.
func checkUnmovedKept(t *testing.T, topic string, ms []*procMember, marks []int) {
	t.Helper()
	for i, m := range ms {
		now := m.ownedNow()
		for _, p := range m.revokedSince(marks[i]) {
			if slices.Contains(now, p) {
				t.Errorf("%s had %s/%d revoked but holds it again: an unmoved partition was revoked", m.clientID, topic, p)
			}
		}
	}
}

// checkNoneRevoked checks that no member in ms had anything revoked since
// marks; when says during what.
func checkNoneRevoked(t *testing.T, ms []*procMember, marks []int, when string) {
	t.Helper()
	for i, m := range ms {
		if rv := m.revokedSince(marks[i]); len(rv) > 0 {
			t.Errorf("%s had %v revoked %s", m.clientID, rv, when)
		}
	}
}

// checkBackInPlace checks that a static member's restart caused no
// rebalance: the group is still in generation g0's, and m, the new
// process, holds what the old one held.
func checkBackInPlace(t *testing.T, g0, g adminGroup, m *procMember, held []int32) {
	t.Helper()
	if g.Generation != g0.Generation {
		t.Errorf("generation went from %d to %d over a static member's restart: it caused a rebalance", g0.Generation, g.Generation)
	}
	if got := m.ownedNow(); !slices.Equal(got, held) {
		t.Errorf("the restarted static member %s holds %v; before the restart it held %v", m.clientID, got, held)
	}
}

// checkServedBy checks the protocol the group agreed on and the plugin
// serving it.
func checkServedBy(t *testing.T, g adminGroup, protocol, assignor string) {
	t.Helper()
	if g.Protocol != protocol || g.Assignor != assignor {
		t.Errorf("protocol %q assignor %q; want %q served by %q", g.Protocol, g.Assignor, protocol, assignor)
	}
}

// checkRelayTellable checks that the assignor the members offered (its
// answer offered, or err) computes something else than the plugin serving
// them (served): otherwise a gateway relaying the members' own choice
// would pass for one that assigns.
func checkRelayTellable(t *testing.T, offered map[string]map[string][]int32, err error, served map[string]map[string][]int32) {
	t.Helper()
	if err != nil || sameAssignment(offered, served) {
		t.Errorf("the offered assignor gives the same assignment (%v, %v): a relay could not be told from the gateway", offered, err)
	}
}

// createTopicPlaced creates topic on the real broker, bypassing the
// gateway, and returns its placement once the broker's metadata has a
// leader for every partition: CreateTopics answers before the metadata
// cache has caught up, and a Metadata request in between gets
// UNKNOWN_TOPIC_OR_PARTITION.
func createTopicPlaced(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32) map[string]placement {
	t.Helper()
	createTopic(ctx, t, cl, topic, partitions)
	return map[string]placement{topic: waitPlacement(ctx, t, cl, topic, int(partitions))}
}

// waitPlacement polls the metadata of topic until it has partitions
// partitions, each with a leader.
func waitPlacement(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int) placement {
	t.Helper()
	for {
		pls, err := topicPlacement(ctx, cl, topic)
		if err == nil && len(pls[topic].leaders) == partitions && !slices.Contains(pls[topic].leaders, -1) {
			return pls[topic]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s never had a leader for each of its %d partitions in the metadata: %v (%v)", topic, partitions, pls, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
