package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Case is one benchmark group: an initial join and, for two-phase cases, a
// rejoin built from what each member received in the initial phase.
type Case struct {
	Name string
	// Partitions maps each topic to its partition count.
	Partitions map[string]int32
	// Initial are the members of the first phase.
	Initial []Member
	// Rejoin builds the members of the second phase from owned[i], what
	// Initial[i] received. Nil for a one-phase case.
	Rejoin func(owned []map[string][]int32) []Member
}

// BuiltinNames lists the built-in cases.
func BuiltinNames() []string { return []string{"java-large", "mid", "heterogeneous", "churn"} }

// Builtin returns the named built-in case, generated deterministically.
func Builtin(name string) (*Case, bool) {
	switch name {
	case "java-large":
		return uniform(name, 2000, 500, 2000), true
	case "mid":
		return uniform(name, 100, 25, 1000), true
	case "heterogeneous":
		return heterogeneous(), true
	case "churn":
		return churn(), true
	}
	return nil, false
}

func topicNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("topic-%04d", i)
	}
	return names
}

func memberID(i int) string { return fmt.Sprintf("member-%05d", i) }

// uniform is a group whose members all subscribe to every topic. On rejoin
// every member but the first reports what it received; the first comes back
// with nothing, as a restarted consumer does.
func uniform(name string, members, topics, partitions int) *Case {
	c := &Case{Name: name, Partitions: make(map[string]int32, topics)}
	names := topicNames(topics)
	for _, t := range names {
		c.Partitions[t] = int32(partitions)
	}
	for i := range members {
		c.Initial = append(c.Initial, Member{ID: memberID(i), Topics: names, Generation: -1})
	}
	c.Rejoin = func(owned []map[string][]int32) []Member {
		ms := slices.Clone(c.Initial)
		for i := 1; i < len(ms); i++ {
			ms[i].Owned, ms[i].Generation = owned[i], 1
		}
		return ms
	}
	return c
}

// heterogeneous: a quarter of the members subscribe to the first half of the
// topics, the rest to the second half.
func heterogeneous() *Case {
	const members, topics, partitions = 500, 100, 200
	c := &Case{Name: "heterogeneous", Partitions: make(map[string]int32, topics)}
	names := topicNames(topics)
	for _, t := range names {
		c.Partitions[t] = partitions
	}
	for i := range members {
		subs := names[topics/2:]
		if i < members/4 {
			subs = names[:topics/2]
		}
		c.Initial = append(c.Initial, Member{ID: memberID(i), Topics: subs, Generation: -1})
	}
	return c
}

// churn: small topics and seeded random subscriptions; on rejoin 50 members
// have left and the rest report what they own.
func churn() *Case {
	const members, topics, removed = 200, 40, 50
	rng := rand.New(rand.NewPCG(42, 7))
	c := &Case{Name: "churn", Partitions: make(map[string]int32, topics)}
	names := topicNames(topics)
	for _, t := range names {
		c.Partitions[t] = 1 + rng.Int32N(10)
	}
	for i := range members {
		var subs []string
		for _, t := range names {
			if rng.IntN(4) == 0 {
				subs = append(subs, t)
			}
		}
		if len(subs) == 0 {
			subs = []string{names[rng.IntN(topics)]}
		}
		c.Initial = append(c.Initial, Member{ID: memberID(i), Topics: subs, Generation: -1})
	}
	gone := make(map[int]bool, removed)
	for _, i := range rng.Perm(members)[:removed] {
		gone[i] = true
	}
	c.Rejoin = func(owned []map[string][]int32) []Member {
		var ms []Member
		for i, m := range c.Initial {
			if gone[i] {
				continue
			}
			m.Owned, m.Generation = owned[i], 1
			ms = append(ms, m)
		}
		return ms
	}
	return c
}

// FromRequest turns a request (such as a simulate scenario's) into a
// one-phase case: each member's subscriptions, owned partitions and owned
// generation, and the partition counts of the topics that exist. Racks,
// user data and placement are not carried over.
func FromRequest(name string, req *abi.Request) *Case {
	c := &Case{Name: name, Partitions: make(map[string]int32, len(req.Topics))}
	for _, t := range req.Topics {
		if t.Exists {
			c.Partitions[t.Name] = t.PartitionCount
		}
	}
	for _, m := range req.Members {
		bm := Member{ID: m.MemberID, InstanceID: m.InstanceID, Generation: m.OwnedGeneration}
		for _, t := range m.Topics {
			bm.Topics = append(bm.Topics, req.Topics[t].Name)
		}
		if len(m.Owned) > 0 {
			bm.Owned = make(map[string][]int32, len(m.Owned))
			for _, tp := range m.Owned {
				name := req.Topics[tp.Topic].Name
				bm.Owned[name] = append(bm.Owned[name], tp.Partitions...)
			}
		}
		c.Initial = append(c.Initial, bm)
	}
	return c
}
