package wasmruntime

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// liveOps is a runner whose instances count, across every plugin sharing
// it, how many exist at once.
type liveOps struct {
	fakeOps
	alive, peak *atomic.Int64
}

func (o *liveOps) newInstance(ctx context.Context) (int, error) {
	n := o.alive.Add(1)
	for p := o.peak.Load(); n > p && !o.peak.CompareAndSwap(p, n); p = o.peak.Load() {
	}
	return o.fakeOps.newInstance(ctx)
}

func (o *liveOps) discard(ctx context.Context, v int) {
	o.alive.Add(-1)
	o.fakeOps.discard(ctx, v)
}

func (o *liveOps) abandon(v int) {
	o.alive.Add(-1)
	o.fakeOps.abandon(v)
}

type poolRig struct {
	pool        *instancePool
	alive, peak atomic.Int64
	clock       atomic.Int64 // nanoseconds the fake clock is ahead of real time
}

func newPoolRig(size int, queueTimeout time.Duration, hooks ...Hook) *poolRig {
	r := &poolRig{pool: newInstancePool(size, queueTimeout, hooks)}
	r.pool.now = func() time.Time { return time.Now().Add(time.Duration(r.clock.Load())) }
	return r
}

func (r *poolRig) plugin(name string) (*lifecycle[int], *liveOps) {
	ops := &liveOps{fakeOps: fakeOps{dead: map[int]bool{}}, alive: &r.alive, peak: &r.peak}
	l := newLifecycle[int](ops, name, r.pool, newBackground(nil), new(atomic.Bool))
	return &l, ops
}

// queueLen waits until n calls are queued, so that tests enqueue in a known
// order.
func (r *poolRig) queueLen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.pool.stats().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("queued %d, want %d", r.pool.stats().Queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type acquired struct {
	who int
	v   int
	err error
}

func TestPool_CallsBeyondTheBoundQueueAndAreServedInArrivalOrder(t *testing.T) {
	r := newPoolRig(1, 10*time.Second)
	l, ops := r.plugin("a")
	ctx := context.Background()
	held, err := l.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan acquired, 5)
	for i := range 5 {
		go func() {
			v, err := l.acquire(ctx)
			got <- acquired{i, v, err}
		}()
		r.queueLen(t, i+1)
	}
	l.release(ctx, held)
	var order []int
	for range 5 {
		a := <-got
		if a.err != nil || a.v != held {
			t.Fatalf("waiter %d got instance %d, %v; want the one instance %d", a.who, a.v, a.err, held)
		}
		order = append(order, a.who)
		l.release(ctx, a.v)
	}
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("served in order %v, want arrival order", order)
	}
	if started, _, _ := ops.counts(); started != 1 {
		t.Fatalf("%d instances started for six calls, want 1: calls must queue, not spawn", started)
	}
	if s := r.pool.stats(); s.Waits != 5 || s.Queued != 0 || s.Overloads != 0 || s.WaitMax <= 0 {
		t.Fatalf("stats %+v, want 5 waits, none queued now, no overload, a positive longest wait", s)
	}
}

type queueHook struct {
	mu    sync.Mutex
	waits []time.Duration
	over  int
}

func (h *queueHook) OnQueueWait(_ string, d time.Duration, overloaded bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waits = append(h.waits, d)
	if overloaded {
		h.over++
	}
}

func TestPool_ACallQueuedPastItsBoundIsAnOverloadNotATimeout(t *testing.T) {
	hook := &queueHook{}
	r := newPoolRig(1, 30*time.Millisecond, hook)
	l, _ := r.plugin("a")
	ctx := context.Background()
	held, _ := l.acquire(ctx)
	_, err := l.acquire(ctx)
	if !errors.Is(err, ErrOverloaded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrOverloaded and not ErrTimeout", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason() != "overloaded" {
		t.Fatalf("err = %#v, want an *Error with reason overloaded", err)
	}
	if s := r.pool.stats(); s.Overloads != 1 || s.Queued != 0 || s.Busy != 1 {
		t.Fatalf("stats %+v, want one overload, nothing queued, one busy", s)
	}
	hook.mu.Lock()
	if hook.over != 1 || len(hook.waits) != 2 || hook.waits[1] < 30*time.Millisecond {
		t.Fatalf("hook saw waits %v with %d overloads; want the immediate call and one overload after 30ms", hook.waits, hook.over)
	}
	hook.mu.Unlock()
	// The overloaded call left nothing behind: the next one is served.
	l.release(ctx, held)
	if v, err := l.acquire(ctx); err != nil || v != held {
		t.Fatalf("acquire after the overload = %d, %v; want the instance", v, err)
	}
}

func TestPool_ACallerCanceledInTheQueueIsNoOverload(t *testing.T) {
	r := newPoolRig(1, time.Minute)
	l, _ := r.plugin("a")
	held, _ := l.acquire(context.Background())
	defer l.release(context.Background(), held)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := l.acquire(ctx)
	if !errors.Is(err, ErrTimeout) || errors.Is(err, ErrOverloaded) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if s := r.pool.stats(); s.Overloads != 0 || s.Queued != 0 {
		t.Fatalf("stats %+v, want no overload and an empty queue", s)
	}
}

func TestPool_APluginWithNoInstanceTakesThePlaceOfTheOneIdleLongest(t *testing.T) {
	r := newPoolRig(2, time.Second)
	a, aops := r.plugin("a")
	b, bops := r.plugin("b")
	c, _ := r.plugin("c")
	ctx := context.Background()
	va, _ := a.acquire(ctx)
	vb, _ := b.acquire(ctx)
	a.release(ctx, va) // a is idle the longest
	r.clock.Add(int64(time.Millisecond))
	b.release(ctx, vb)
	vc, err := c.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, discarded, _ := aops.counts(); !slices.Equal(discarded, []int{va}) {
		t.Fatalf("a's discarded %v, want its idle instance ended for c", discarded)
	}
	if _, discarded, _ := bops.counts(); len(discarded) != 0 {
		t.Fatalf("b's instance %v ended: it was idle for less time", discarded)
	}
	c.release(ctx, vc)
	if r.peak.Load() > 2 {
		t.Fatalf("%d instances at once, the bound is 2", r.peak.Load())
	}
}

// TestPool_AWaiterNeedingAnEvictionLetsWarmCallsGoFirstForAWhile: a call
// that would end another plugin's warm instance lets a later call of that
// plugin have it, until it has waited evictAfter.
func TestPool_AWaiterNeedingAnEvictionLetsWarmCallsGoFirstForAWhile(t *testing.T) {
	r := newPoolRig(1, 10*time.Second)
	a, aops := r.plugin("a")
	b, _ := r.plugin("b")
	ctx := context.Background()
	va, _ := a.acquire(ctx)
	gotB := make(chan acquired, 1)
	go func() {
		v, err := b.acquire(ctx)
		gotB <- acquired{0, v, err}
	}()
	r.queueLen(t, 1)
	gotA := make(chan acquired, 1)
	go func() {
		v, err := a.acquire(ctx)
		gotA <- acquired{1, v, err}
	}()
	r.queueLen(t, 2)
	a.release(ctx, va)
	if got := <-gotA; got.err != nil || got.v != va {
		t.Fatalf("a's later call got %d, %v; want a's warm instance", got.v, got.err)
	}
	select {
	case got := <-gotB:
		t.Fatalf("b got %d before it had waited %v, ending a's warm instance", got.v, evictAfter)
	default:
	}
	r.clock.Add(int64(evictAfter))
	// Another of a's calls queues behind b; b has waited long enough now
	// and goes first.
	gotA2 := make(chan acquired, 1)
	go func() {
		v, err := a.acquire(ctx)
		gotA2 <- acquired{2, v, err}
	}()
	r.queueLen(t, 2)
	a.release(ctx, va)
	got := <-gotB
	if got.err != nil {
		t.Fatal(got.err)
	}
	if _, discarded, _ := aops.counts(); !slices.Equal(discarded, []int{va}) {
		t.Fatalf("a's discarded %v, want its instance ended for b", discarded)
	}
	select {
	case got := <-gotA2:
		t.Fatalf("a's call got %d while b held the only place", got.v)
	default:
	}
	b.release(ctx, got.v)
	if got := <-gotA2; got.err != nil {
		t.Fatal(got.err)
	}
}

// TestPool_RandomLoadNeverExceedsTheBoundAndServesEveryCall runs many
// plugins' calls at once, with every way a call can end, and checks the
// bound, the books and that no call is lost.
func TestPool_RandomLoadNeverExceedsTheBoundAndServesEveryCall(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		size := 1 + rng.IntN(4)
		r := newPoolRig(size, time.Minute)
		var ls []*lifecycle[int]
		for i := range 1 + rng.IntN(4) {
			l, _ := r.plugin(string(rune('a' + i)))
			ls = append(ls, l)
		}
		var wg sync.WaitGroup
		var served atomic.Int64
		const calls = 200
		for i := range calls {
			l := ls[rng.IntN(len(ls))]
			end := rng.IntN(4)
			hold := time.Duration(rng.IntN(200)) * time.Microsecond
			wg.Go(func() {
				ctx := context.Background()
				v, err := l.acquire(ctx)
				if err != nil {
					t.Errorf("seed %d call %d: %v", seed, i, err)
					return
				}
				served.Add(1)
				time.Sleep(hold)
				switch end {
				case 0, 1:
					l.release(ctx, v)
				case 2: // the call broke its instance
					l.ops.discard(ctx, v)
					l.lost()
				case 3:
					l.releaseAfterIdle(v, func(context.Context) bool { time.Sleep(hold); return true })
				}
			})
		}
		wg.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for r.pool.stats().Idling > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		s := r.pool.stats()
		if served.Load() != calls {
			t.Fatalf("seed %d: %d of %d calls served", seed, served.Load(), calls)
		}
		if p := r.peak.Load(); p > int64(size) {
			t.Fatalf("seed %d: %d instances at once, the bound is %d", seed, p, size)
		}
		if s.Busy != 0 || s.Queued != 0 || s.Idling != 0 || int64(s.Idle) != r.alive.Load() {
			t.Fatalf("seed %d: stats %+v with %d instances alive; want every live instance idle", seed, s, r.alive.Load())
		}
		for _, l := range ls {
			l.drain(func(v int) { l.ops.discard(context.Background(), v) })
		}
		if r.alive.Load() != 0 || r.pool.stats().Idle != 0 {
			t.Fatalf("seed %d: %d instances alive after every plugin closed", seed, r.alive.Load())
		}
	}
}

func TestPool_InstancesIdleTooLongAreEndedAndBusyOnesKept(t *testing.T) {
	r := newPoolRig(3, time.Second)
	a, aops := r.plugin("a")
	b, bops := r.plugin("b")
	ctx := context.Background()
	va, _ := a.acquire(ctx)
	vb, _ := b.acquire(ctx)
	busy, _ := a.acquire(ctx)
	a.release(ctx, va)
	r.clock.Add(int64(2 * time.Second))
	b.release(ctx, vb) // idle for no time yet
	if n := r.pool.reap(r.pool.now().Add(-time.Second)); n != 1 {
		t.Fatalf("reaped %d, want only a's instance idle for 2s", n)
	}
	if _, discarded, _ := aops.counts(); !slices.Equal(discarded, []int{va}) {
		t.Errorf("a's discarded %v, want [%d]: the idle one, not the busy one", discarded, va)
	}
	if _, discarded, _ := bops.counts(); len(discarded) != 0 {
		t.Errorf("b's instance %v ended though it had just been used", discarded)
	}
	if s := r.pool.stats(); s.Idle != 1 || s.Busy != 1 {
		t.Errorf("stats %+v, want b's instance idle and a's busy one", s)
	}
	a.release(ctx, busy)
	// The place freed serves the next call at once.
	if _, err := b.acquire(ctx); err != nil {
		t.Fatal(err)
	}
}
