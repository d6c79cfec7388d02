package wasmruntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The life of a plugin's instances, in this process or in worker
// processes alike: a call takes one from the pool or starts one, gives it
// back or ends it, and between calls an instance may run the guest's idle
// call in the background. lifecycle holds those rules once for both
// runners; instanceOps is what each runner does its own way.

// A guest that exports wasmassign_idle gets that call after each call whose
// instance the host keeps, off the caller's path: the caller's Assign
// returns with the response, and the instance goes back to the pool only
// when idle has ended. Meanwhile the instance is neither in the pool nor
// free, so a call that finds the pool empty waits for it rather than
// starting another instance, which costs far more (tens of milliseconds for
// a Go guest in-process, a hundred or more for a worker) than the idle call
// it waits out, and idle is bounded by the call timeout.

// instanceOps is what a runner knows of its instances that the lifecycle
// does not.
type instanceOps[T any] interface {
	// newInstance starts an instance, ready for a call.
	newInstance(ctx context.Context) (T, error)
	// usable reports whether an instance taken from the pool can serve: a
	// worker may have died there.
	usable(v T) bool
	// discard ends an instance that is not in a call.
	discard(ctx context.Context, v T)
	// abandon ends an instance whose idle call was due after close began
	// (the plugin's or the host's), so that it will not run.
	abandon(v T)
}

// lifecycle is a plugin's instances between calls: the pool of ready ones
// and those in their idle call. Each runner embeds one.
type lifecycle[T any] struct {
	ops     instanceOps[T]
	plugin  string        // the plugin's name, for errors
	timeout time.Duration // the call timeout, for errors
	pool    chan T
	// idle tracks the instances whose idle call runs in the background.
	idle idlers
	// bg runs the idle calls; once it closes, none starts.
	bg *background
	// closed is the plugin's: set, no instance goes back to the pool.
	closed *atomic.Bool
}

func newLifecycle[T any](ops instanceOps[T], plugin string, timeout time.Duration, poolSize int, bg *background, closed *atomic.Bool) lifecycle[T] {
	return lifecycle[T]{ops: ops, plugin: plugin, timeout: timeout, pool: make(chan T, max(poolSize, 1)), bg: bg, closed: closed}
}

// acquire returns an instance for a call: one from the pool, waiting for
// one in its idle call when the pool is empty, or else a new one. One that
// can no longer serve is ended and another taken: not the call's fault.
func (l *lifecycle[T]) acquire(ctx context.Context) (T, error) {
	for {
		v, ok, err := takeFromPool(ctx, l.pool, &l.idle)
		if err != nil {
			var zero T
			return zero, deadlineError(l.plugin, l.timeout, err)
		}
		if !ok {
			return l.ops.newInstance(ctx)
		}
		if l.ops.usable(v) {
			return v, nil
		}
		l.ops.discard(ctx, v)
	}
}

// release returns v to the pool, or ends it when the pool is full or the
// plugin is closing, or the background its work belongs to is (for the
// in-process runner, the plugin's own, which closes after the plugin is
// marked closed).
func (l *lifecycle[T]) release(ctx context.Context, v T) {
	if l.closed.Load() || l.bg.isClosing() {
		l.ops.discard(ctx, v)
		return
	}
	select {
	case l.pool <- v:
	default:
		l.ops.discard(ctx, v)
	}
}

// releaseAfterIdle runs idle, the guest's idle call on v, in the background
// under bg's context, and then returns v to the pool when idle says it
// may: false means idle has ended v. Meanwhile callers that find the pool
// empty wait for v. Once bg is closing, v is abandoned instead.
func (l *lifecycle[T]) releaseAfterIdle(v T, idle func(ctx context.Context) bool) {
	if !l.bg.enter() {
		l.ops.abandon(v)
		return
	}
	l.idle.start()
	go func() {
		defer l.bg.leave()
		defer l.idle.done() // after the release: a woken caller finds v in the pool
		if idle(l.bg.ctx) {
			l.release(context.Background(), v)
		}
	}()
}

// drain hands every instance in the pool to end, which must end it.
func (l *lifecycle[T]) drain(end func(T)) {
	for {
		select {
		case v := <-l.pool:
			end(v)
		default:
			return
		}
	}
}

// background runs work nobody waits for (idle calls, spare workers) in
// goroutines that its owner's close waits for, and refuses new work once
// that close has begun. A child's goroutines count in its parent too, so
// that closing the parent waits for them and ends their context.
type background struct {
	// ctx ends when close begins; background work runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	parent *background
	mu     sync.Mutex
	// closing is set under mu when close begins: no goroutine starts after
	// it, and the work it cuts short is not a plugin failure.
	closing bool
	wg      sync.WaitGroup
}

// newBackground returns a background whose context and count are also
// parent's, when parent is not nil.
func newBackground(parent *background) *background {
	b := &background{parent: parent}
	ctx := context.Background()
	if parent != nil {
		ctx = parent.ctx
	}
	b.ctx, b.cancel = context.WithCancel(ctx)
	return b
}

// enter counts a goroutine about to start, here and in every parent, and
// reports false, counting nothing, when one of them is closing. The
// goroutine must call leave when it ends.
func (b *background) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing || b.parent != nil && !b.parent.enter() {
		return false
	}
	b.wg.Add(1)
	return true
}

// leave ends what enter counted.
func (b *background) leave() {
	b.wg.Done()
	if b.parent != nil {
		b.parent.leave()
	}
}

// run runs f in a goroutine that close waits for, or reports false without
// running it once close has begun.
func (b *background) run(f func()) bool {
	if !b.enter() {
		return false
	}
	go func() {
		defer b.leave()
		f()
	}()
	return true
}

// close refuses new work and ends the context of what runs; wait then
// waits for it. They are apart so that an owner can close under its own
// lock, together with its own state.
func (b *background) close() {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.cancel()
}

// wait returns when every goroutine started here has ended.
func (b *background) wait() { b.wg.Wait() }

// isClosing says whether close has begun.
func (b *background) isClosing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closing
}

// idlers counts one plugin's instances whose idle call is running, and wakes
// callers that wait for one of them to come back.
type idlers struct {
	mu   sync.Mutex
	n    int
	wake chan struct{} // closed, and replaced, when an idle call ends
}

// start counts an instance whose idle call begins.
func (t *idlers) start() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

// done marks an idle call as ended. Call it after the instance is back in
// the pool or discarded, so that a woken caller sees the pool as it is.
func (t *idlers) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

// pending returns a channel closed when the next idle call ends, or nil when
// none is running.
func (t *idlers) pending() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return nil
	}
	if t.wake == nil {
		t.wake = make(chan struct{})
	}
	return t.wake
}

// takeFromPool returns an instance from pool, waiting for one that is in
// its idle call when the pool is empty. ok is false when the pool is empty
// and no idle call is running: the caller starts a new instance. The error
// is ctx's, when it ends first.
func takeFromPool[T any](ctx context.Context, pool chan T, idle *idlers) (v T, ok bool, err error) {
	for {
		select {
		case v := <-pool:
			return v, true, nil
		default:
		}
		wake := idle.pending()
		if wake == nil {
			// An idle call may have ended between the two checks.
			select {
			case v := <-pool:
				return v, true, nil
			default:
				return v, false, nil
			}
		}
		select {
		case v := <-pool:
			return v, true, nil
		case <-wake:
		case <-ctx.Done():
			return v, false, ctx.Err()
		}
	}
}

// deadlineError is the error of a call whose ctx ended (ctxErr) before the
// guest answered: a deadline names the host's timeout, as when the guest
// itself is stopped.
func deadlineError(plugin string, timeout time.Duration, ctxErr error) *Error {
	if errors.Is(ctxErr, context.Canceled) {
		return &Error{Plugin: plugin, Kind: ErrTimeout, Detail: "canceled", Err: context.Canceled}
	}
	return &Error{Plugin: plugin, Kind: ErrTimeout, Detail: fmt.Sprintf("stopped after %s", timeout)}
}
