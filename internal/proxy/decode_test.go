package proxy

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeRequest holds the decoding of intercepted requests to kmsg's
// copying decoder: whatever the bytes, a request decoded with its strings
// aliasing the frame equals the one decoded with copies, or both fail.
func FuzzDecodeRequest(f *testing.F) {
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m-1", 3
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "g", "m-1", 3
	for _, topic := range []string{"a", "b"} {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = topic
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.Metadata = 1, 42, kmsg.StringPtr("md")
		t.Partitions = append(t.Partitions, p)
		commit.Topics = append(commit.Topics, t)
	}
	for _, req := range []kmsg.Request{hb, commit} {
		for v := req.GetVersion(); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f.Add(req.Key(), v, req.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		if !aliasedStrings(key) {
			key = int16(kmsg.OffsetCommit)
		}
		copied, aliased := kmsg.RequestForKey(key), kmsg.RequestForKey(key)
		if version < 0 || version > copied.MaxVersion() {
			return
		}
		copied.SetVersion(version)
		aliased.SetVersion(version)
		errCopied := copied.ReadFrom(append([]byte(nil), body...))
		errAliased := decodeRequest(aliased, append([]byte(nil), body...))
		if (errCopied == nil) != (errAliased == nil) {
			t.Fatalf("%s v%d: copying decode says %v, aliasing decode %v", kmsg.NameForKey(key), version, errCopied, errAliased)
		}
		if errCopied == nil && !reflect.DeepEqual(copied, aliased) {
			t.Fatalf("%s v%d: decoded differently:\n%+v\n%+v", kmsg.NameForKey(key), version, copied, aliased)
		}
	})
}
