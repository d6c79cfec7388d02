package driver

import (
	"sync"
	"time"
)

// rackBook remembers the rack each client sent in its Fetch requests
// (KIP-392 RackID), for clients whose subscriptions carry none (librdkafka,
// kafkajs, older Java). The proxy's sightings are recorded from connection
// goroutines; the driver reads it when it hands the coordinator a JoinGroup
// (coordinator.Client.FetchRack), so the book is safe for concurrent use.
type rackBook struct {
	mu     sync.Mutex
	racks  map[rackKey]fetchRack
	pruned time.Time // the last scan for idle clients
	now    func() time.Time
}

type rackKey struct{ clientID, host string }

// fetchRack is a recorded rack and when its client last sent it. Two
// consumers behind one client id and host (two in one process or pod) may
// send different racks: the key then names no one rack, and until
// conflictUntil the book answers no lookup for it (the coordinator ties
// each of their sightings to its member by the partitions fetched).
type fetchRack struct {
	rack          string
	seen          time.Time
	conflictUntil time.Time
}

// Clients come and go (every restart of a pod is a new host), so the book
// forgets: once it holds fetchRacksPruneAt clients, a Record of a new one
// drops those not heard from for fetchRacksIdle, scanning at most once a
// minute. A client is heard from when a connection of it sends its first
// Fetch and when the driver looks its rack up (every JoinGroup of its
// members), so a small book never forgets, and a large one forgets only
// clients that neither reconnected nor rebalanced for a day. The proxy
// records only authenticated clients when the upstream requires SASL.
const (
	fetchRacksPruneAt = 10000
	fetchRacksIdle    = 24 * time.Hour
	// fetchRacksConflict is how long two racks sent for one key keep it
	// ambiguous; a client that moved racks for good is believed after it.
	fetchRacksConflict = 10 * time.Minute
)

func newRackBook(now func() time.Time) *rackBook {
	return &rackBook{racks: make(map[rackKey]fetchRack), now: now}
}

// record notes the rack a client sent, and reports whether it is news: a
// rack this client had not sent before. An empty rack is ignored.
func (f *rackBook) record(clientID, host, rack string) bool {
	if rack == "" {
		return false
	}
	k := rackKey{clientID, host}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.racks[k]
	if !ok && len(f.racks) >= fetchRacksPruneAt && now.Sub(f.pruned) >= time.Minute {
		f.pruned = now
		for k, r := range f.racks {
			if now.Sub(r.seen) >= fetchRacksIdle {
				delete(f.racks, k)
			}
		}
	}
	next := fetchRack{rack: rack, seen: now, conflictUntil: old.conflictUntil}
	if ok && old.rack != rack && now.Sub(old.seen) < fetchRacksConflict {
		next.conflictUntil = now.Add(fetchRacksConflict)
	}
	f.racks[k] = next
	return !ok || old.rack != rack
}

// lookup returns the rack a client last sent, and false when none is known
// or the client id and host have lately sent more than one.
func (f *rackBook) lookup(clientID, host string) (string, bool) {
	k := rackKey{clientID, host}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.racks[k]
	if !ok {
		return "", false
	}
	r.seen = now
	f.racks[k] = r
	if now.Before(r.conflictUntil) {
		return "", false
	}
	return r.rack, true
}
