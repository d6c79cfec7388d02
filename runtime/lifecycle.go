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
// returns with the response, and the instance serves again only when idle
// has ended. Meanwhile it holds its place in the host's pool and serves
// nobody, and a call of its plugin that finds no instance to spare waits
// for it rather than start another, which costs far more (tens of
// milliseconds for a Go guest in-process, a hundred or more for a worker)
// than the idle call it waits out; idle is bounded by the call timeout.

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

// lifecycle is a plugin's instances between calls, as its share of the
// host's pool (pool.go). Each runner embeds one.
type lifecycle[T any] struct {
	ops   instanceOps[T]
	owner *poolOwner
	// bg runs the idle calls; once it closes, none starts.
	bg *background
	// closed is the plugin's: set, no instance goes back to the pool.
	closed *atomic.Bool
}

func newLifecycle[T any](ops instanceOps[T], plugin string, pool *instancePool, bg *background, closed *atomic.Bool) lifecycle[T] {
	l := lifecycle[T]{ops: ops, bg: bg, closed: closed}
	l.owner = pool.join(plugin, func(v any) { ops.discard(context.Background(), v.(T)) })
	return l
}

// acquire returns an instance for a call: an idle one of the plugin, or a
// new one started in a free place of the host's pool, or in the place of
// another plugin's idle instance, waiting in the host's queue when there
// is none. One that can no longer serve is ended and another started in
// its place: not the call's fault. Every instance acquire returns goes
// back through release, releaseAfterIdle or lost.
func (l *lifecycle[T]) acquire(ctx context.Context) (T, error) {
	var zero T
	s, err := l.owner.take(ctx)
	if err != nil {
		return zero, err
	}
	l.owner.endEvicted(s)
	if s.v != nil {
		v := s.v.(T)
		if l.ops.usable(v) {
			return v, nil
		}
		l.ops.discard(ctx, v)
	}
	v, err := l.ops.newInstance(ctx)
	if err != nil {
		l.owner.lost()
		return zero, err
	}
	return v, nil
}

// release returns v to the pool, or ends it when the plugin is closing, or
// the background its work belongs to is (for the in-process runner, the
// plugin's own, which closes after the plugin is marked closed).
func (l *lifecycle[T]) release(ctx context.Context, v T) {
	if l.closed.Load() || l.bg.isClosing() {
		l.ops.discard(ctx, v)
		l.owner.lost()
		return
	}
	l.owner.put(v)
}

// lost frees the place of a call's instance that the runner has ended (a
// trap, a timeout, a dead worker).
func (l *lifecycle[T]) lost() { l.owner.lost() }

// releaseAfterIdle runs idle, the guest's idle call on v, in the background
// under bg's context, and then returns v to the pool when idle says it
// may: false means idle has ended v. Meanwhile callers of the plugin that
// find no instance to spare wait for v. Once bg is closing, v is abandoned
// instead.
func (l *lifecycle[T]) releaseAfterIdle(v T, idle func(ctx context.Context) bool) {
	if !l.bg.enter() {
		l.ops.abandon(v)
		l.owner.lost()
		return
	}
	l.owner.toIdleCall()
	go func() {
		defer l.bg.leave()
		ok := idle(l.bg.ctx)
		if ok && (l.closed.Load() || l.bg.isClosing()) {
			l.ops.discard(context.Background(), v)
			ok = false
		}
		l.owner.idleEnded(v, ok)
	}()
}

// drain ends every idle instance of the plugin with end, and marks its
// share of the pool closed: instances in calls end when their calls do.
func (l *lifecycle[T]) drain(end func(T)) {
	for _, v := range l.owner.close() {
		end(v.(T))
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

// deadlineError is the error of a call whose ctx ended (ctxErr) before the
// guest answered: a deadline names the host's timeout, as when the guest
// itself is stopped.
func deadlineError(plugin string, timeout time.Duration, ctxErr error) *Error {
	if errors.Is(ctxErr, context.Canceled) {
		return &Error{Plugin: plugin, Kind: ErrTimeout, Detail: "canceled", Err: context.Canceled}
	}
	return &Error{Plugin: plugin, Kind: ErrTimeout, Detail: fmt.Sprintf("stopped after %s", timeout)}
}
