package loadtest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// clockTicks is the unit of /proc's CPU times: USER_HZ, 100 on every
// Linux Go supports.
const clockTicks = 100

// treeSample is one reading of a process and its descendants.
type treeSample struct {
	// cpu is user and system time of every process of the tree, with
	// that of their children already reaped (cutime, cstime), so a
	// worker process that exits between two samples is still counted.
	cpu time.Duration
	// rss is the sum of VmRSS, pss that of Pss (the processes' own
	// pages, plus a share of those they map together, the binary's among
	// them, so that the tree's pages count once), and procs the number
	// of processes. pss is -1 where the kernel has no smaps_rollup.
	rss, pss int64
	procs    int
}

// procStat is what the generator reads of /proc/PID/stat.
type procStat struct {
	ppid int
	// own is the process's user and system time; cpu adds its reaped
	// children's.
	own, cpu time.Duration
}

// readStat parses /proc/PID/stat. The command name is in parentheses and
// may hold spaces and parentheses itself, so fields are counted from the
// last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	// After the name: state, ppid, ... utime (11), stime, cutime, cstime (14).
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var st procStat
	if st.ppid, err = strconv.Atoi(string(f[1])); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	var ticks [4]int64
	for i, t := range f[11:15] {
		if ticks[i], err = strconv.ParseInt(string(t), 10, 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: cpu time: %w", pid, err)
		}
	}
	st.own = time.Duration(ticks[0]+ticks[1]) * time.Second / clockTicks
	st.cpu = st.own + time.Duration(ticks[2]+ticks[3])*time.Second/clockTicks
	return st, nil
}

// readRSS returns VmRSS from /proc/PID/status, in bytes.
func readRSS(pid int) (int64, error) {
	return readKB(pid, "status", "VmRSS:")
}

// readPSS returns Pss from /proc/PID/smaps_rollup, in bytes.
func readPSS(pid int) (int64, error) {
	return readKB(pid, "smaps_rollup", "Pss:")
}

// readKB returns the "key N kB" line of /proc/PID/file in bytes; 0 when
// the file has no such line (a zombie has no memory).
func readKB(pid int, file, key string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte(key))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("/proc/%d/%s: %s %q", pid, file, key, bytes.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/%s: %s %w", pid, file, key, err)
		}
		return kb << 10, nil
	}
	return 0, nil
}

// sampleTree reads root and every process descended from it, found by
// their parent ids among all of /proc.
func sampleTree(root int) (treeSample, error) {
	rootStat, err := readStat(root)
	if err != nil {
		return treeSample{}, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return treeSample{}, err
	}
	stats := map[int]procStat{root: rootStat}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // exited since the listing
		}
		stats[pid] = st
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var s treeSample
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		s.procs++
		s.cpu += stats[pid].cpu
		queue = append(queue, children[pid]...)
		rss, err := readRSS(pid)
		if err != nil {
			continue // exited since the listing
		}
		s.rss += rss
		if pss, err := readPSS(pid); err != nil {
			s.pss = -1 // a kernel before 4.14
		} else if s.pss >= 0 {
			s.pss += pss
		}
	}
	return s, nil
}

// sampler follows a process tree during a run: the peak of its memory
// and process count between start and stop, read every interval, and
// its CPU time on demand.
type sampler struct {
	pid      int
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu        sync.Mutex
	peakRSS   int64
	peakPSS   int64 // -1 once a sample had no PSS
	peakProcs int
	err       error
}

func startSampler(pid int, every time.Duration) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.sample()
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

// sample reads the tree once, keeping the peaks, and returns its CPU
// time.
func (s *sampler) sample() time.Duration {
	ts, err := sampleTree(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = fmt.Errorf("process %d: %w", s.pid, err)
		}
		return 0
	}
	s.peakRSS = max(s.peakRSS, ts.rss)
	if ts.pss < 0 || s.peakPSS < 0 {
		s.peakPSS = -1
	} else {
		s.peakPSS = max(s.peakPSS, ts.pss)
	}
	s.peakProcs = max(s.peakProcs, ts.procs)
	return ts.cpu
}

// finish stops the sampling and returns the peaks (peakPSS -1 when the
// kernel gave none), and the first error (the process exited during the
// run). Calls after the first only return the same.
func (s *sampler) finish() (peakRSS, peakPSS int64, peakProcs int, err error) {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.sample()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakRSS, s.peakPSS, s.peakProcs, s.err
}

// selfCPU is this process's CPU time, without its children: the
// generator's own.
func selfCPU() time.Duration {
	st, err := readStat(os.Getpid())
	if err != nil {
		return 0
	}
	return st.own
}
