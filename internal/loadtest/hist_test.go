package loadtest

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank quantile of sorted values: the least
// value that at least q of them do not exceed.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(q * float64(len(sorted)))
	if float64(rank) < q*float64(len(sorted)) {
		rank++
	}
	return sorted[max(rank, 1)-1]
}

func TestHistogram_QuantilesWithinABucketOfTheExactOnes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name   string
		values func() []time.Duration
	}{
		{"one value", func() []time.Duration { return []time.Duration{1234567} }},
		{"small exact values", func() []time.Duration {
			var vs []time.Duration
			for v := range 100 {
				vs = append(vs, time.Duration(v+1))
			}
			return vs
		}},
		{"uniform 1µs to 10ms", func() []time.Duration {
			var vs []time.Duration
			for range 10000 {
				vs = append(vs, time.Microsecond+rand.N(10*time.Millisecond))
			}
			return vs
		}},
		{"long tail", func() []time.Duration {
			var vs []time.Duration
			for range 5000 {
				vs = append(vs, time.Duration(rng.ExpFloat64()*float64(200*time.Microsecond)))
			}
			return append(vs, 3*time.Second) // one stall
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vs := tc.values()
			var h histogram
			for _, v := range vs {
				h.record(v)
			}
			slices.Sort(vs)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
				exact, got := exactQuantile(vs, q), h.quantile(q)
				// The bucket's upper end, at most 1/64 above its values.
				if got < exact || float64(got-exact) > float64(exact)/64+1 {
					t.Errorf("q%v = %v, exact %v", q, got, exact)
				}
			}
			s := h.summary()
			if s.Count != uint64(len(vs)) || s.Max != vs[len(vs)-1] {
				t.Errorf("summary %+v, want count %d and max %v", s, len(vs), vs[len(vs)-1])
			}
		})
	}
}

func TestHistogram_EmptyIsZero(t *testing.T) {
	var h histogram
	if s := h.summary(); s != (Latency{}) {
		t.Errorf("empty histogram's summary %+v", s)
	}
}

func TestHistogram_BucketsTileTheRange(t *testing.T) {
	for i := 1; i < numBuckets; i++ {
		_, prevHi := bucketRange(i - 1)
		lo, hi := bucketRange(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], after one ending at %d", i, lo, hi, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: its ends map to %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
	}
}
