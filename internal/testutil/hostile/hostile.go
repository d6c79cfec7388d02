// Package hostile builds the malformed Kafka requests that bad-input tests
// throw at the proxy and the daemon: random bytes, and real requests with
// bytes flipped, cut or appended so that they get past the first fields
// into the decoders.
package hostile

import (
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// Body returns a request body for key at version: a third of the time pure
// random bytes, otherwise kmsg's default request with a few bytes flipped,
// the tail cut off, or garbage appended. A group request names group
// before it is mangled (kmsg's default is the empty id, which a
// coordinator refuses before looking further); "" keeps the default.
func Body(rng *rand.Rand, key, version int16, group string) []byte {
	req := kmsg.RequestForKey(key)
	if req == nil || rng.IntN(3) == 0 {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	req.SetVersion(version)
	if group != "" {
		nameGroup(req, group)
	}
	b := req.AppendTo(nil)
	switch rng.IntN(3) {
	case 0:
		for range 1 + rng.IntN(4) {
			if len(b) > 0 {
				b[rng.IntN(len(b))] = byte(rng.UintN(256))
			}
		}
	case 1:
		if len(b) > 0 {
			b = b[:rng.IntN(len(b))]
		}
	default:
		for range 1 + rng.IntN(20) {
			b = append(b, byte(rng.UintN(256)))
		}
	}
	return b
}

// nameGroup sets the group id of a group request; other requests are left
// alone.
func nameGroup(req kmsg.Request, group string) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		r.Group = group
		r.ProtocolType = "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}}}
	case *kmsg.SyncGroupRequest:
		r.Group, r.Generation = group, 1
	case *kmsg.HeartbeatRequest:
		r.Group, r.Generation = group, 1
	case *kmsg.LeaveGroupRequest:
		r.Group = group
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "not-a-member"}}
	case *kmsg.OffsetCommitRequest:
		r.Group, r.Generation = group, 1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	case *kmsg.TxnOffsetCommitRequest:
		r.Group = group
	case *kmsg.OffsetFetchRequest:
		r.Group = group
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	case *kmsg.OffsetDeleteRequest:
		r.Group = group
	case *kmsg.DescribeGroupsRequest:
		r.Groups = []string{group}
	case *kmsg.DeleteGroupsRequest:
		r.Groups = []string{group}
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey = group
		r.CoordinatorKeys = []string{group}
	}
}

// Flexible reports whether key at version uses the flexible (KIP-482)
// header, by kmsg's tables; unknown keys are not flexible.
func Flexible(key, version int16) bool {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return false
	}
	req.SetVersion(version)
	return req.IsFlexible()
}

// MaxVersion is the highest version kmsg knows for key, or 3 for keys it
// does not know; callers go one past it to reach unsupported versions.
func MaxVersion(key int16) int16 {
	if req := kmsg.RequestForKey(key); req != nil {
		return req.MaxVersion()
	}
	return 3
}

// Frame returns a whole size-prefixed request for key at version with a
// valid header and a Body naming group; one time in eight it is cut
// short, as by a client that hangs up mid-request.
func Frame(rng *rand.Rand, key, version int16, clientID, group string) []byte {
	b, at := frame.AppendSize(nil)
	b = frame.AppendRequestHeader(b, frame.RequestHeader{Key: key, Version: version, CorrelationID: 1, ClientID: &clientID, Flexible: Flexible(key, version)})
	b = append(b, Body(rng, key, version, group)...)
	frame.FinishSize(b, at)
	if rng.IntN(8) == 0 {
		b = b[:rng.IntN(len(b))]
	}
	return b
}
