package wasmruntime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// children returns the pids of this process's children and the sum of
// their resident set sizes, in bytes.
func children(t *testing.T) (pids []int, rss int64) {
	t.Helper()
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command, which is in parentheses and may
		// hold spaces: state, ppid, ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		if fields[0] == "Z" {
			continue // exited, not yet reaped: holds no memory
		}
		pids = append(pids, pid)
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				rss += kb << 10
			}
		}
	}
	return pids, rss
}

// TestWorker_ABurstOfAssignmentsQueuesWithinTheBound: a burst of concurrent
// assignments, many times the bound, runs on at most the configured
// workers: no call spawns a process of its own, none times out or is
// overloaded, and the workers' memory stays what that many workers hold.
func TestWorker_ABurstOfAssignmentsQueuesWithinTheBound(t *testing.T) {
	if !processIsolationSupported {
		t.Skip("no worker processes on this platform")
	}
	const workers, calls = 2, 120
	h, _ := newTestHost(t, processConfig().WithMaxInstances(workers))
	p := loadArtefact(t, h, rangeWasm)
	req := uniformRequest(10, 100, 16) // a group of 10 over 1,600 partitions
	ctx := context.Background()
	if _, err := p.Assign(ctx, "range", req); err != nil {
		t.Fatal(err)
	}
	_, oneWorker := children(t)

	var peakProcs int
	var peakRSS int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			pids, rss := children(t)
			peakProcs, peakRSS = max(peakProcs, len(pids)), max(peakRSS, rss)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			r := *req
			r.GroupID = fmt.Sprintf("group-%d", i)
			if _, err := p.Assign(ctx, "range", &r); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Errorf("a call of the burst failed: %v", err)
	}
	s := h.PoolStats()
	t.Logf("peak %d workers, %d MiB together (one worker: %d MiB); %d calls waited, longest %v", peakProcs, peakRSS>>20, oneWorker>>20, s.Waits, s.WaitMax)
	if peakProcs > workers {
		t.Errorf("%d worker processes at once, the bound is %d", peakProcs, workers)
	}
	// Each worker grows past the first's size with its own calls, and the
	// guest collects lazily on a loaded machine (2.1x seen), but the
	// workers together stay within a few of what one held after a call
	// like them; a worker per call held 1.7 GB here.
	if limit := int64(workers) * 3 * oneWorker; peakRSS > limit {
		t.Errorf("workers held %d MiB together, over %d MiB: %d workers of %d MiB", peakRSS>>20, limit>>20, workers, oneWorker>>20)
	}
	if s.Waits == 0 || s.Overloads != 0 || s.Queued != 0 || s.Busy != 0 {
		t.Errorf("pool %+v: want calls that waited, no overload, and nothing left queued or busy", s)
	}
}
