package coordinator

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type phase uint8

const (
	idle    phase = iota // must (re)join
	joining              // JoinGroup in flight
	joined               // has a generation, must sync
	syncing              // SyncGroup in flight
	stable               // has its assignment
	dead                 // fenced or crashed; sends nothing
)

// simClient behaves like a Java or kgo consumer as far as the coordinator
// can tell: KIP-394 round trips, eager revocation before rejoining, or
// KIP-429 cooperative revocation of what the assignment no longer holds.
// held is what it really owns: what it was given and has not let go of.
type simClient struct {
	h           *harness
	name        string
	group       string
	client      Client
	instance    string
	memberID    string
	generation  int32
	protocols   []string
	topics      []string
	cooperative bool
	joinVersion int16
	subVersion  int16
	rack        string

	held  map[string][]int32
	phase phase
	req   RequestID
	// staleClaim, when set, is reported as owned at generation 1 on the next
	// join: a zombie's memory of old ownership that it no longer holds.
	staleClaim map[string][]int32
}

func newSim(h *harness, name, group string, protocols []string, topics []string) *simClient {
	coop := true
	for _, p := range protocols {
		coop = coop && p == "cooperative-sticky"
	}
	return &simClient{h: h, name: name, group: group, client: Client{ID: name, Host: "/10.0.0.1"}, protocols: protocols, topics: topics,
		cooperative: coop, joinVersion: 9, subVersion: 3, generation: -1, held: map[string][]int32{}}
}

func (s *simClient) subscription() []byte {
	sb := sub{version: s.subVersion, topics: s.topics, gen: s.generation, rack: s.rack}
	if s.cooperative {
		sb.owned = s.held
	}
	if s.staleClaim != nil {
		sb.owned, sb.gen = s.staleClaim, 1
		s.staleClaim = nil
	}
	return sb.bytes()
}

// join sends a JoinGroup. An eager client revokes everything first.
func (s *simClient) join() {
	if s.phase == dead {
		return
	}
	if !s.cooperative {
		clear(s.held)
	}
	var ps []proto
	meta := s.subscription()
	for _, p := range s.protocols {
		ps = append(ps, proto{p, meta})
	}
	r := joinReq(s.joinVersion, s.group, s.memberID, s.instance, ps...)
	s.phase = joining
	s.req = s.h.send(s.client, r)
	s.poll()
}

func (s *simClient) sync() {
	if s.phase != joined {
		return
	}
	r := syncReq(5, s.group, s.memberID, s.generation)
	if s.instance != "" {
		inst := s.instance
		r.InstanceID = &inst
	}
	s.phase = syncing
	s.req = s.h.send(s.client, r)
	s.poll()
}

func (s *simClient) heartbeat() {
	if s.phase != stable && s.phase != joined {
		return
	}
	r := hbReq(s.group, s.memberID, s.generation)
	if s.instance != "" {
		inst := s.instance
		r.InstanceID = &inst
	}
	resp := s.h.do(s.client, r).(*kmsg.HeartbeatResponse)
	s.onError(resp.ErrorCode)
}

// leave revokes everything and leaves the group.
func (s *simClient) leave() {
	if s.phase == dead || s.memberID == "" {
		return
	}
	clear(s.held)
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = 5, s.group
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = s.memberID
	if s.instance != "" {
		inst := s.instance
		m.InstanceID = &inst
	}
	r.Members = append(r.Members, m)
	s.h.do(s.client, r)
	s.phase = dead
}

// crash stops the client: it holds nothing and sends nothing more.
func (s *simClient) crash() {
	clear(s.held)
	s.phase = dead
}

// onError reacts to a group error as Kafka clients do.
func (s *simClient) onError(code int16) {
	switch code {
	case 0:
	case kerr.RebalanceInProgress.Code:
		s.phase = idle
	case kerr.IllegalGeneration.Code:
		// onPartitionsLost: the member no longer owns anything.
		clear(s.held)
		s.generation = -1
		s.phase = idle
	case kerr.UnknownMemberID.Code:
		clear(s.held)
		s.generation = -1
		s.memberID = ""
		s.phase = idle
	case kerr.FencedInstanceID.Code:
		clear(s.held)
		s.phase = dead
	default:
		s.phase = idle
	}
}

// poll takes the answer of the request in flight, if it has come.
func (s *simClient) poll() {
	if s.phase != joining && s.phase != syncing {
		return
	}
	resp, ok := s.h.take(s.req)
	if !ok {
		return
	}
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		switch r.ErrorCode {
		case kerr.MemberIDRequired.Code:
			s.memberID = r.MemberID
			s.phase = idle
			s.join()
		case 0:
			s.memberID = r.MemberID
			// Java and kgo take the generation from the JoinGroup answer.
			s.generation = r.Generation
			s.phase = joined
		default:
			s.onError(r.ErrorCode)
		}
	case *kmsg.SyncGroupResponse:
		if r.ErrorCode != 0 {
			s.onError(r.ErrorCode)
			return
		}
		assigned := decodeAssignment(s.h.t, r.MemberAssignment)
		lost := false
		for t, ps := range s.held {
			for _, p := range ps {
				if !slices.Contains(assigned[t], p) {
					lost = true
				}
			}
		}
		s.held = maps.Clone(assigned)
		s.phase = stable
		if s.cooperative && lost {
			// KIP-429: revoke what was taken away, then rejoin at once.
			s.phase = idle
		}
	}
}

// holds reports whether the client owns partition p of topic t.
func (s *simClient) holds(t string, p int32) bool { return slices.Contains(s.held[t], p) }
