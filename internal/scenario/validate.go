package scenario

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// check validates s and returns the warnings it has: things that are legal
// but probably worth a look, such as a claim on a topic that does not exist.
// The first problem found, in file order, is the error.
func (s *Scenario) check() (warnings []string, err error) {
	if s.Generation < 0 {
		return nil, fmt.Errorf("generation: must be >= 0, got %d", s.Generation)
	}
	switch s.RebalanceProtocol {
	case "", "eager", "cooperative":
	default:
		return nil, fmt.Errorf(`rebalance_protocol: must be "eager" or "cooperative", got %q`, s.RebalanceProtocol)
	}
	if s.Generate == nil && s.Topics == nil {
		return nil, errors.New("topics: required")
	}
	if s.Generate == nil && s.Members == nil {
		return nil, errors.New("members: required")
	}

	brokers := make(map[int32]int, len(s.Brokers))
	for i, b := range s.Brokers {
		if b.ID < 0 {
			return nil, fmt.Errorf("brokers[%d].id: must be >= 0, got %d", i, b.ID)
		}
		if j, dup := brokers[b.ID]; dup {
			return nil, fmt.Errorf("brokers[%d].id: duplicate broker id %d (also brokers[%d])", i, b.ID, j)
		}
		brokers[b.ID] = i
	}
	if s.Generate != nil {
		// The generated rounds are checked in full when they are built.
		return nil, s.checkGenerate()
	}

	topics := make(map[string]int, len(s.Topics))
	var total int64
	for i := range s.Topics {
		t := &s.Topics[i]
		w, err := checkTopic(i, t, brokers)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
		if j, dup := topics[t.Name]; dup {
			return nil, fmt.Errorf("topics[%d].name: duplicate topic %q (also topics[%d])", i, t.Name, j)
		}
		topics[t.Name] = i
		total += int64(t.count())
		if total > MaxPartitions {
			return nil, fmt.Errorf("topics[%d]: the scenario would have more than %d partitions", i, MaxPartitions)
		}
	}

	ids := make(map[string]int, len(s.Members))
	instances := make(map[string]int)
	prev := newOwnerTable(s.Topics, topics)
	for i := range s.Members {
		m := &s.Members[i]
		if m.ID == "" {
			return nil, fmt.Errorf("members[%d].id: required", i)
		}
		if j, dup := ids[m.ID]; dup {
			return nil, fmt.Errorf("members[%d].id: duplicate member id %q (also members[%d])", i, m.ID, j)
		}
		ids[m.ID] = i
		if m.InstanceID != "" {
			if j, dup := instances[m.InstanceID]; dup {
				return nil, fmt.Errorf("members[%d].instance_id: duplicate instance id %q (also members[%d])", i, m.InstanceID, j)
			}
			instances[m.InstanceID] = i
		}
		if m.Topics == nil {
			return nil, fmt.Errorf("members[%d].topics: required", i)
		}
		warned := make(map[string]bool)
		for k, name := range m.Topics {
			if name == "" {
				return nil, fmt.Errorf("members[%d].topics[%d]: empty topic name", i, k)
			}
			if _, ok := topics[name]; !ok && !warned[name] {
				warned[name] = true
				warnings = append(warnings, fmt.Sprintf("members[%d].topics: topic %q does not exist; assignors skip it", i, name))
			}
		}
		if m.Generation < -1 {
			return nil, fmt.Errorf("members[%d].generation: must be >= -1, got %d", i, m.Generation)
		}
		if m.Generation > s.Generation && hasPartitions(m.Owned) {
			warnings = append(warnings, fmt.Sprintf("members[%d].generation: the claim's generation %d is newer than the group's generation %d", i, m.Generation, s.Generation))
		}
		if _, err := base64.StdEncoding.DecodeString(m.UserData); err != nil {
			var corrupt base64.CorruptInputError
			if errors.As(err, &corrupt) {
				return nil, fmt.Errorf("members[%d].user_data: invalid base64 at byte %d", i, int64(corrupt))
			}
			return nil, fmt.Errorf("members[%d].user_data: invalid base64: %v", i, err)
		}
		for _, field := range []struct {
			name  string
			parts map[string][]int32
		}{{"owned", m.Owned}, {"previous", m.Previous}} {
			path := fmt.Sprintf("members[%d].%s", i, field.name)
			for _, name := range slices.Sorted(maps.Keys(field.parts)) {
				list := field.parts[name]
				w, err := checkClaim(path, name, list, s.Topics, topics)
				if err != nil {
					return nil, err
				}
				warnings = append(warnings, w...)
				if field.name != "previous" {
					continue
				}
				// The coordinator hands each partition to one member, so
				// a partition in two previous assignments cannot happen.
				for _, p := range list {
					if j := prev.set(name, p, i); j >= 0 {
						return nil, fmt.Errorf("%s[%q]: partition %d is also in members[%d].previous", path, name, p, j)
					}
				}
			}
		}
	}
	return warnings, nil
}

// checkTopic validates one topic entry and its partitions.
func checkTopic(i int, t *Topic, brokers map[int32]int) (warnings []string, err error) {
	if t.Name == "" {
		return nil, fmt.Errorf("topics[%d].name: required", i)
	}
	switch {
	case t.Partitions != nil && t.PartitionCount != nil:
		return nil, fmt.Errorf("topics[%d]: has both partitions and partition_count; give one", i)
	case t.Partitions == nil && t.PartitionCount == nil:
		return nil, fmt.Errorf("topics[%d]: needs partitions or partition_count", i)
	}
	if t.PartitionCount != nil && *t.PartitionCount < 0 {
		return nil, fmt.Errorf("topics[%d].partition_count: must be >= 0, got %d", i, *t.PartitionCount)
	}
	if t.ReplicationFactor != nil {
		if t.PartitionCount == nil {
			return nil, fmt.Errorf("topics[%d].replication_factor: only valid with partition_count", i)
		}
		if *t.ReplicationFactor < 1 {
			return nil, fmt.Errorf("topics[%d].replication_factor: must be >= 1, got %d", i, *t.ReplicationFactor)
		}
	}
	n := len(t.Partitions)
	if n > MaxPartitions {
		return nil, fmt.Errorf("topics[%d].partitions: more than %d partitions", i, MaxPartitions)
	}
	seen := make([]bool, n)
	placed := false
	for j := range t.Partitions {
		p := &t.Partitions[j]
		path := fmt.Sprintf("topics[%d].partitions[%d]", i, j)
		if p.ID < 0 || int(p.ID) >= n {
			return nil, fmt.Errorf("%s.id: must be in 0..%d (the topic lists %d partitions), got %d", path, n-1, n, p.ID)
		}
		if seen[p.ID] {
			return nil, fmt.Errorf("%s.id: partition %d listed twice", path, p.ID)
		}
		seen[p.ID] = true
		if len(brokers) > 0 {
			for _, r := range p.Replicas {
				if _, ok := brokers[r]; !ok {
					return nil, fmt.Errorf("%s.replicas: unknown broker id %d", path, r)
				}
			}
		}
		for _, r := range p.ISR {
			if !slices.Contains(p.Replicas, r) {
				return nil, fmt.Errorf("%s.isr: broker %d is not a replica", path, r)
			}
		}
		if p.Leader != nil && *p.Leader != -1 && !slices.Contains(p.Replicas, *p.Leader) {
			return nil, fmt.Errorf("%s.leader: broker %d is not a replica", path, *p.Leader)
		}
		placed = placed || p.Replicas != nil || p.Leader != nil
	}
	if placed && len(brokers) == 0 {
		warnings = append(warnings, fmt.Sprintf("topics[%d].partitions: replicas and leaders are ignored because the scenario lists no brokers", i))
	}
	return warnings, nil
}

// checkClaim validates the partitions a member lists for one topic in owned
// or previous. Partitions of a topic the scenario does not have are legal (a
// member may still claim a deleted topic) and produce a warning.
func checkClaim(path, name string, list []int32, all []Topic, topics map[string]int) (warnings []string, err error) {
	if name == "" {
		return nil, fmt.Errorf("%s: empty topic name", path)
	}
	ti, exists := topics[name]
	var count int32
	if exists {
		count = all[ti].count()
	}
	for _, p := range list {
		if p < 0 {
			return nil, fmt.Errorf("%s[%q]: partition %d is negative", path, name, p)
		}
		if exists && p >= count {
			return nil, fmt.Errorf("%s[%q]: partition %d out of range, topic %q has %d partitions", path, name, p, name, count)
		}
	}
	sorted := slices.Clone(list)
	slices.Sort(sorted)
	for k := 1; k < len(sorted); k++ {
		if sorted[k] == sorted[k-1] {
			return nil, fmt.Errorf("%s[%q]: partition %d listed twice", path, name, sorted[k])
		}
	}
	if !exists && len(list) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: topic %q does not exist; its partitions are kept as a claim on a deleted topic", path, name))
	}
	return warnings, nil
}

// count is the number of partitions t has.
func (t *Topic) count() int32 {
	if t.PartitionCount != nil {
		return *t.PartitionCount
	}
	return int32(len(t.Partitions))
}

// ownerTable records which member lists each partition, to find a partition
// listed by two members. Topics that exist get a slice indexed by partition;
// claims on missing topics, which have no bound, go in maps.
type ownerTable struct {
	all     []Topic
	topics  map[string]int
	byIndex [][]int32 // member index + 1; 0 for none
	missing map[string]map[int32]int
}

func newOwnerTable(all []Topic, topics map[string]int) *ownerTable {
	return &ownerTable{all: all, topics: topics, byIndex: make([][]int32, len(all))}
}

// set records member m for partition p of topic name, which must be in range,
// and returns the member that already had it, or -1.
func (o *ownerTable) set(name string, p int32, m int) int {
	if ti, ok := o.topics[name]; ok {
		owners := o.byIndex[ti]
		if owners == nil {
			owners = make([]int32, o.all[ti].count())
			o.byIndex[ti] = owners
		}
		if prev := owners[p]; prev != 0 {
			return int(prev - 1)
		}
		owners[p] = int32(m + 1)
		return -1
	}
	if o.missing == nil {
		o.missing = make(map[string]map[int32]int)
	}
	owners := o.missing[name]
	if owners == nil {
		owners = make(map[int32]int)
		o.missing[name] = owners
	}
	if prev, ok := owners[p]; ok {
		return prev
	}
	owners[p] = m
	return -1
}

func hasPartitions(tps map[string][]int32) bool {
	for _, ps := range tps {
		if len(ps) > 0 {
			return true
		}
	}
	return false
}
