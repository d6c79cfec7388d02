package cluster

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestLease_RunsFromTheLastConfirmedSend follows one lease on a fake
// clock: held from a confirmation until its send plus the length, never
// shortened by an older confirmation, gone at once when lost, and gone
// after a pause longer than what is left of it.
func TestLease_RunsFromTheLastConfirmedSend(t *testing.T) {
	var now time.Duration
	l := NewLease(6*time.Second, func() time.Duration { return now })
	if l.Held() || l.Until() != 0 {
		t.Fatal("a new lease is held")
	}
	now = 10 * time.Second
	l.Confirmed(9 * time.Second)
	if !l.Held() || l.Until() != 15*time.Second {
		t.Fatalf("after a confirmation sent at 9s: held %v until %v, want until 15s", l.Held(), l.Until())
	}
	l.Confirmed(8 * time.Second) // a retry's late answer
	if l.Until() != 15*time.Second {
		t.Fatalf("an older confirmation moved the lease to %v", l.Until())
	}
	now = 15*time.Second - 1
	if !l.Held() {
		t.Fatal("not held just before its end")
	}
	now = 15 * time.Second
	if l.Held() {
		t.Fatal("held at its end")
	}
	l.Confirmed(14 * time.Second)
	if !l.Held() {
		t.Fatal("not renewed")
	}
	now += time.Minute // SIGSTOP, then SIGCONT
	if l.Held() {
		t.Fatal("held after a pause longer than the lease")
	}
	l.Confirmed(now)
	l.Lost()
	if l.Held() {
		t.Fatal("held after it was lost")
	}
	if got := l.ServableFrom(time.Hour, true); got != time.Hour {
		t.Errorf("a clean shard is servable from %v, want at once", got)
	}
	if got := l.ServableFrom(time.Hour, false); got != time.Hour+6*time.Second+Slack(6*time.Second) {
		t.Errorf("an unclean shard is servable from %v", got)
	}
}

// TestLease_NoTwoGatewaysAnswerAtOnce checks the lease's argument on
// random timelines in real time. Gateway A's last confirmed request is
// sent at real time tS; Kafka hands the shard to B in a generation B
// receives at tR, which cannot be before tS. A answers until its clock
// passes its lease; B, with no release in the log, from ServableFrom on
// its own clock. The two clocks start anywhere and run up to 0.4% apart
// from real time, and A may be paused for any time: A's last answer must
// come before B's first.
func TestLease_NoTwoGatewaysAnswerAtOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		length := time.Duration(1+rng.IntN(60_000)) * time.Millisecond
		rateA, rateB := 1+(rng.Float64()-0.5)*0.008, 1+(rng.Float64()-0.5)*0.008
		offA, offB := time.Duration(rng.Int64N(int64(time.Hour))), time.Duration(rng.Int64N(int64(time.Hour)))
		clockA := func(real time.Duration) time.Duration { return offA + time.Duration(float64(real)*rateA) }
		clockB := func(real time.Duration) time.Duration { return offB + time.Duration(float64(real)*rateB) }
		tS := time.Duration(rng.Int64N(int64(time.Minute)))
		tR := tS + time.Duration(rng.Int64N(int64(2*length))) // at once, or later
		var readA time.Duration
		a := NewLease(length, func() time.Duration { return readA })
		a.Confirmed(clockA(tS))
		b := NewLease(length, nil)
		from := b.ServableFrom(clockB(tR), false)
		// A's last real instant of holding, and B's first of serving.
		lastA := time.Duration(float64(a.until-offA)/rateA) - 1
		firstB := time.Duration(float64(from-offB) / rateB)
		readA = clockA(lastA)
		if !a.Held() {
			continue // rounding put lastA past the end: nothing to compare
		}
		if lastA >= firstB {
			t.Fatalf("A answers until %v, B from %v (lease %v, rates %.4f/%.4f, sent %v, received %v)", lastA, firstB, length, rateA, rateB, tS, tR)
		}
	}
}

// TestBootClock_Advances: the clock moves forward with real time.
func TestBootClock_Advances(t *testing.T) {
	c := BootClock()
	a := c()
	time.Sleep(20 * time.Millisecond)
	b := c()
	if d := b - a; d < 15*time.Millisecond || d > 5*time.Second {
		t.Fatalf("the clock moved %v over a 20ms sleep", d)
	}
}
