package wasmruntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A guest that exports wasmassign_idle gets that call after each call whose
// instance the host keeps, off the caller's path: the caller's Assign
// returns with the response, and the instance goes back to the pool only
// when idle has ended. Meanwhile the instance is neither in the pool nor
// free, so a call that finds the pool empty waits for it rather than
// starting another instance, which costs far more (tens of milliseconds for
// a Go guest in-process, a hundred or more for a worker) than the idle call
// it waits out, and idle is bounded by the call timeout.

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
