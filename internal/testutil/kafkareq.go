package testutil

import "github.com/twmb/franz-go/pkg/kmsg"

// SimpleCommit is an OffsetCommit of one partition's offset by a group
// without members (generation -1), as admin tools and the gateway's
// forwards send it, at version (7 and below name topics, not ids).
func SimpleCommit(version int16, group, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = version, group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
