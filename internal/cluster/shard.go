package cluster

import "hash/fnv"

// HashName names the hash ShardOf uses, as the layout record states it, so
// that gateways that would place groups differently never share a topic.
const HashName = "fnv1a64"

// ShardOf is the shard of the state topic that group belongs to, of
// partitions: the FNV-1a 64-bit hash of its id, modulo the count. Every
// gateway must compute the same, so it never changes for a layout.
func ShardOf(group string, partitions int) int {
	if partitions <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(group))
	return int(h.Sum64() % uint64(partitions))
}
