package sticky

import "slices"

// component is a part of a group that can be assigned on its own: members
// and the topics they subscribe to, such that no member outside subscribes
// to any of those topics. Groups shared by several applications with
// disjoint topics split into components, and a component whose members all
// subscribe alike is assigned like a uniform group, with its even quotas and
// round-robin dealing, however different the rest of the group is.
type component struct {
	members []int32 // in Kafka's member order
	ranks   []int32 // ascending
	uniform bool
}

// components splits a group into its components, and returns the component
// of each topic rank and of each member (-1 for a member that subscribes to
// nothing assignable).
func (g *group) components() (comps []component, ofRank, ofMember []int32) {
	nt := len(g.byRank)
	parent := make([]int32, nt)
	for r := range parent {
		parent[r] = int32(r)
	}
	find := func(r int32) int32 {
		for parent[r] != r {
			parent[r] = parent[parent[r]]
			r = parent[r]
		}
		return r
	}
	n := len(g.req.Members)
	for m := range n {
		subs := g.memberTopics(int32(m))
		for _, r := range subs[min(1, len(subs)):] {
			a, b := find(subs[0]), find(r)
			if a != b {
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	ofRank = make([]int32, nt)
	id := make([]int32, nt)
	for r := range id {
		id[r] = -1
	}
	for r := range nt {
		root := find(int32(r))
		if id[root] < 0 {
			id[root] = int32(len(comps))
			comps = append(comps, component{uniform: true})
		}
		ofRank[r] = id[root]
		comps[id[root]].ranks = append(comps[id[root]].ranks, int32(r))
	}
	ofMember = make([]int32, n)
	first := make([]int32, len(comps)) // a member of each component, to compare with
	for _, m := range g.order {
		ofMember[m] = -1
		subs := g.memberTopics(m)
		if len(subs) == 0 {
			continue
		}
		c := ofRank[subs[0]]
		ofMember[m] = c
		comp := &comps[c]
		if len(comp.members) == 0 {
			first[c] = m
		} else if comp.uniform {
			comp.uniform = slices.Equal(subs, g.memberTopics(first[c]))
		}
		comp.members = append(comp.members, m)
	}
	return comps, ofRank, ofMember
}

// assignComponents assigns a group whose members do not all subscribe
// alike, component by component: uniform components as uniform groups, the
// others together through the general assignment. kept are the settled
// claims, sorted by start.
func (g *group) assignComponents(kept []claim, rk *racks) []claim {
	comps, ofRank, ofMember := g.components()
	kept = g.splitComponents(kept, ofRank)
	// A run stays only in its topic's component, and only when its member
	// belongs there: members of other components do not subscribe to it.
	keptBy := make([][]claim, len(comps))
	var general []claim
	for _, c := range kept {
		k := ofRank[c.topic]
		if ofMember[c.member] != k {
			continue
		}
		if comps[k].uniform {
			keptBy[k] = append(keptBy[k], c)
		} else {
			general = append(general, c)
		}
	}
	var out []claim
	inGeneral := make([]bool, len(g.req.Members))
	anyGeneral := false
	for k, comp := range comps {
		if comp.uniform {
			out = append(out, g.assignUniform(comp.members, comp.ranks, keptBy[k], rk)...)
			continue
		}
		anyGeneral = true
		for _, m := range comp.members {
			inGeneral[m] = true
		}
	}
	if anyGeneral {
		// The general assignment works topic by topic on contiguous runs.
		if !allContiguous(general) {
			general = g.unstride(general)
		}
		out = append(out, g.assignGeneral(general, rk, inGeneral)...)
	}
	return out
}

// splitComponents cuts the runs of kept (sorted by start) that reach into
// topics of another component than their first one into pieces of one
// topic each; runs within one component keep their stride across topics.
// It returns runs sorted by start.
func (g *group) splitComponents(kept []claim, ofRank []int32) []claim {
	nt := len(g.byRank)
	if nt == 0 {
		return kept
	}
	// stretch[r] is the last rank of the stretch of ranks from r on that
	// all belong to r's component.
	stretch := make([]int32, nt)
	stretch[nt-1] = int32(nt - 1)
	for r := nt - 2; r >= 0; r-- {
		stretch[r] = int32(r)
		if ofRank[r] == ofRank[r+1] {
			stretch[r] = stretch[r+1]
		}
	}
	inside := func(c *claim) bool { return c.last() < g.base[stretch[c.topic]+1] }
	cut := false
	for i := range kept {
		if !inside(&kept[i]) {
			cut = true
			break
		}
	}
	if !cut {
		return kept
	}
	out := make([]claim, 0, len(kept))
	for _, c := range kept {
		if inside(&c) {
			out = append(out, c)
			continue
		}
		// Cut at every topic: this only happens when members switch
		// between applications sharing a group id.
		if c.contiguous() {
			out = g.appendSplit(out, c)
		} else {
			out = g.appendStridedPieces(out, c)
		}
	}
	sortByStart(out)
	return out
}
