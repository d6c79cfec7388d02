package wasmruntime

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeOps stands in for a runner: instances are numbers, started from 1.
type fakeOps struct {
	mu                   sync.Mutex
	started              int
	dead                 map[int]bool
	discarded, abandoned []int
}

func (o *fakeOps) newInstance(context.Context) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started++
	return o.started, nil
}

func (o *fakeOps) usable(v int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.dead[v]
}

func (o *fakeOps) discard(_ context.Context, v int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.discarded = append(o.discarded, v)
}

func (o *fakeOps) abandon(v int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.abandoned = append(o.abandoned, v)
}

func (o *fakeOps) counts() (started int, discarded, abandoned []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started, slices.Clone(o.discarded), slices.Clone(o.abandoned)
}

func newFakeLifecycle(bg *background) (*lifecycle[int], *fakeOps, *atomic.Bool) {
	return newFakeLifecycleIn(newInstancePool(1, time.Second, nil), bg)
}

func newFakeLifecycleIn(pool *instancePool, bg *background) (*lifecycle[int], *fakeOps, *atomic.Bool) {
	ops := &fakeOps{dead: map[int]bool{}}
	closed := new(atomic.Bool)
	l := newLifecycle[int](ops, "fake", pool, bg, closed)
	return &l, ops, closed
}

func TestLifecycle_CallerWaitsForTheIdlingInstanceRatherThanStartingOne(t *testing.T) {
	l, ops, _ := newFakeLifecycle(newBackground(nil))
	ctx := context.Background()
	v, err := l.acquire(ctx)
	if err != nil || v != 1 {
		t.Fatalf("acquire = %d, %v; want a first instance", v, err)
	}
	finish := make(chan struct{})
	l.releaseAfterIdle(v, func(context.Context) bool { <-finish; return true })
	got := make(chan int)
	go func() {
		w, err := l.acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	select {
	case w := <-got:
		t.Fatalf("acquire returned %d while the only instance was in its idle call", w)
	case <-time.After(50 * time.Millisecond):
	}
	close(finish)
	if w := <-got; w != 1 {
		t.Fatalf("acquire = %d, want the instance back from its idle call", w)
	}
	if started, _, _ := ops.counts(); started != 1 {
		t.Fatalf("%d instances started, want 1", started)
	}
}

func TestLifecycle_CallerCanceledWhileWaitingGetsATimeout(t *testing.T) {
	l, _, _ := newFakeLifecycle(newBackground(nil))
	v, _ := l.acquire(context.Background())
	finish := make(chan struct{})
	defer close(finish)
	l.releaseAfterIdle(v, func(context.Context) bool { <-finish; return true })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.acquire(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}

func TestLifecycle_IdleThatEndsTheInstanceDoesNotReturnIt(t *testing.T) {
	l, ops, _ := newFakeLifecycle(newBackground(nil))
	ctx := context.Background()
	v, _ := l.acquire(ctx)
	l.releaseAfterIdle(v, func(context.Context) bool { return false })
	if w, _ := l.acquire(ctx); w != 2 {
		t.Fatalf("acquire = %d, want a new instance", w)
	}
	if _, discarded, _ := ops.counts(); len(discarded) != 0 {
		t.Fatalf("the lifecycle discarded %v: idle ended the instance itself", discarded)
	}
}

func TestLifecycle_DeadInstanceInThePoolIsDiscarded(t *testing.T) {
	l, ops, _ := newFakeLifecycle(newBackground(nil))
	ctx := context.Background()
	v, _ := l.acquire(ctx)
	l.release(ctx, v)
	ops.mu.Lock()
	ops.dead[v] = true
	ops.mu.Unlock()
	if w, _ := l.acquire(ctx); w != 2 {
		t.Fatalf("acquire = %d, want a new instance", w)
	}
	if _, discarded, _ := ops.counts(); !slices.Equal(discarded, []int{1}) {
		t.Fatalf("discarded %v, want [1]", discarded)
	}
}

func TestLifecycle_ReleaseEndsInstancesOnceClosed(t *testing.T) {
	bg := newBackground(nil)
	l, ops, closed := newFakeLifecycleIn(newInstancePool(2, time.Second, nil), bg)
	ctx := context.Background()
	a, _ := l.acquire(ctx)
	b, _ := l.acquire(ctx)
	l.release(ctx, a)
	closed.Store(true)
	l.release(ctx, b)
	if _, discarded, _ := ops.counts(); !slices.Equal(discarded, []int{b}) {
		t.Fatalf("discarded %v, want [%d]", discarded, b)
	}
	closed.Store(false)
	bg.close()
	c, _ := l.acquire(ctx) // a, kept warm
	l.release(ctx, c)
	if _, discarded, _ := ops.counts(); !slices.Equal(discarded, []int{b, a}) {
		t.Fatalf("discarded %v: a closing background must end released instances too", discarded)
	}
	if s := l.owner.pool.stats(); s.Busy+s.Idle != 0 {
		t.Fatalf("pool %+v after every instance ended, want nothing live", s)
	}
}

func TestLifecycle_IdleDueWhileClosingIsAbandoned(t *testing.T) {
	parent := newBackground(nil)
	l, ops, _ := newFakeLifecycle(newBackground(parent))
	v, _ := l.acquire(context.Background())
	parent.close()
	l.releaseAfterIdle(v, func(context.Context) bool {
		t.Error("an idle call ran after close began")
		return true
	})
	if _, _, abandoned := ops.counts(); !slices.Equal(abandoned, []int{v}) {
		t.Fatalf("abandoned %v, want [%d]", abandoned, v)
	}
	if s := l.owner.pool.stats(); s.Idling != 0 || s.Busy != 0 {
		t.Fatalf("pool %+v: an abandoned instance still holds its place", s)
	}
}

func TestLifecycle_DrainEndsEveryPooledInstance(t *testing.T) {
	ops := &fakeOps{dead: map[int]bool{}}
	l := newLifecycle[int](ops, "fake", newInstancePool(3, time.Second, nil), newBackground(nil), new(atomic.Bool))
	ctx := context.Background()
	var vs []int
	for range 3 {
		v, _ := l.acquire(ctx)
		vs = append(vs, v)
	}
	for _, v := range vs {
		l.release(ctx, v)
	}
	var ended []int
	l.drain(func(v int) { ended = append(ended, v) })
	if !slices.Equal(ended, vs) || l.owner.pool.stats().Idle != 0 {
		t.Fatalf("drained %v, want %v and an empty pool", ended, vs)
	}
}

// TestBackground_ChildWorkCountsInTheParent: closing a parent ends its
// children's contexts and waits for their goroutines, and a closed child
// or parent refuses new work while the other side stays as it was.
func TestBackground_ChildWorkCountsInTheParent(t *testing.T) {
	parent := newBackground(nil)
	child := newBackground(parent)
	var ended atomic.Bool
	if !child.run(func() {
		<-child.ctx.Done()
		time.Sleep(10 * time.Millisecond)
		ended.Store(true)
	}) {
		t.Fatal("a new child refused work")
	}
	parent.close()
	parent.wait()
	if !ended.Load() {
		t.Fatal("the parent's wait returned before its child's goroutine ended")
	}
	if child.run(func() {}) || parent.run(func() {}) {
		t.Fatal("work started after the parent closed")
	}
	if !parent.isClosing() || child.isClosing() {
		t.Fatal("closing the parent marks only the parent as closing")
	}

	parent = newBackground(nil)
	child = newBackground(parent)
	child.close()
	child.wait()
	if child.run(func() {}) {
		t.Fatal("a closed child started work")
	}
	done := make(chan struct{})
	if !parent.run(func() { close(done) }) {
		t.Fatal("closing a child closed its parent")
	}
	<-done
	if parent.ctx.Err() != nil {
		t.Fatal("closing a child ended its parent's context")
	}
}
