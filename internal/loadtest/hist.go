package loadtest

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits sets the histogram's precision: 2^subBits buckets per power of
// two, so a bucket is at most 1/64 (1.6%) of its values wide.
const subBits = 6

// numBuckets covers every non-negative int64 of nanoseconds.
const numBuckets = (64 - subBits) << subBits

// histogram records durations in log-linear buckets. Every member's
// connection reader records into the same histogram, so it is lock-free:
// each record is two atomic adds and, rarely, a compare-and-swap of the
// maximum. Its 30 KiB are allocated once per run and API.
type histogram struct {
	counts [numBuckets]atomic.Uint64
	n      atomic.Uint64
	max    atomic.Int64
}

// bucketOf returns the bucket of v nanoseconds: values below 2^(subBits+1)
// have a bucket each; above, each power of two is split into 2^subBits
// equal buckets.
func bucketOf(v int64) int {
	if v < 1<<(subBits+1) {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	return (shift+1)<<subBits + int(v>>shift) - 1<<subBits
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < 1<<(subBits+1) {
		return int64(i), int64(i)
	}
	shift := i>>subBits - 1
	mantissa := int64(i&(1<<subBits-1) + 1<<subBits)
	lo = mantissa << shift
	return lo, lo + 1<<shift - 1
}

func (h *histogram) record(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// quantile returns the nearest-rank q-quantile (0 < q <= 1): the least
// recorded value that at least q of the values do not exceed, reported as
// its bucket's upper end (never above the maximum), so it errs by at
// most a bucket's width, upward. It is 0 when nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n))
	if float64(rank) < q*float64(n) {
		rank++ // ceil
	}
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := bucketRange(i)
			return time.Duration(min(hi, h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}

// Latency summarises one request kind's round trips.
type Latency struct {
	// Count is the number of round trips measured.
	Count uint64 `json:"count"`
	// P50, P99 and Max are their median, 99th percentile and maximum.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

func (h *histogram) summary() Latency {
	return Latency{Count: h.n.Load(), P50: h.quantile(0.50), P99: h.quantile(0.99), Max: time.Duration(h.max.Load())}
}
