package cluster

import "time"

// A Clock reads a duration since an arbitrary start that never goes back
// and keeps counting while the process is stopped (SIGSTOP) or the machine
// suspended, so that a paused gateway sees at once that its lease ran out.
type Clock func() time.Duration

// Lease is a gateway's right to answer for the shards it owns. Kafka
// confirms it: a heartbeat or SyncGroup of the gateways' group answered
// without error says the gateway was a member, with its shards, when it
// sent the request, and the coordinator keeps a member at least a session
// timeout after its last heartbeat before another member is given its
// shards. So the lease runs a fixed length (shorter than the session) from
// the sending of the last confirmed request, on the gateway's own clock,
// and a gateway that cannot renew it (paused, cut off from Kafka) stops
// answering before anyone else can start.
//
// A Lease is not safe for concurrent use; its owner serializes calls.
type Lease struct {
	length time.Duration
	clock  Clock
	until  time.Duration // valid while clock() < until; zero: not held
}

// NewLease returns a lease of length, not held, read on clock.
func NewLease(length time.Duration, clock Clock) *Lease {
	return &Lease{length: length, clock: clock}
}

// Confirmed renews the lease from sentAt, the clock's reading taken before
// the confirmed request was first sent (retries only make it older, so
// the lease only shorter). A confirmation older than the latest one
// changes nothing.
func (l *Lease) Confirmed(sentAt time.Duration) {
	l.until = max(l.until, sentAt+l.length)
}

// Lost ends the lease at once: Kafka said the gateway is not the member
// it was (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID).
func (l *Lease) Lost() { l.until = 0 }

// Held reports whether the lease holds now.
func (l *Lease) Held() bool { return l.until > 0 && l.clock() < l.until }

// Until is the clock reading at which the lease ends unless renewed; zero
// when it is not held.
func (l *Lease) Until() time.Duration {
	if !l.Held() {
		return 0
	}
	return l.until
}

// Slack is what a gateway waits beyond a lease's length before serving a
// shard another gateway may still be answering for: clocks on two machines
// run at slightly different rates (1% is far beyond what NTP-disciplined
// or free-running crystal clocks drift), and a quarter second covers the
// scheduling of the last answer.
func Slack(length time.Duration) time.Duration { return 250*time.Millisecond + length/100 }

// ServableFrom is when a gateway given a shard (by the generation of the
// gateways' group that it received at receivedAt, on its clock) may first
// answer for it. With clean set (the shard's log ends with a release its
// last owner wrote once it was answering: it stopped before it wrote it) it
// is at once. A release written before its writer's own ServableFrom is
// not clean: an owner before that writer may still hold its lease.
// Otherwise the last owner may still hold a lease, taken from a request it
// sent before this generation began, so before receivedAt: it
// ends within a lease's length of receivedAt, by the last owner's clock,
// and the slack covers the two clocks' rates.
func (l *Lease) ServableFrom(receivedAt time.Duration, clean bool) time.Duration {
	if clean {
		return receivedAt
	}
	return receivedAt + l.length + Slack(l.length)
}
