package coordinator

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroups answers for the groups this coordinator holds; an unknown
// group is described as Dead with no error, as Kafka does before v6.
func (c *Coordinator) describeGroups(id RequestID, r *kmsg.DescribeGroupsRequest) {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = r.Version
	for _, name := range r.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		g := c.groups[name]
		if g == nil {
			rg.State = Dead.String()
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State = g.state.String()
		rg.ProtocolType = g.protocolType
		stable := g.state == Stable
		if stable {
			rg.Protocol = g.protocol
		}
		for _, m := range g.sortedMembers() {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.host
			if m.instanceID != "" {
				inst := m.instanceID
				dm.InstanceID = &inst
			}
			// Metadata and assignment are only meaningful once Stable.
			if stable {
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				dm.MemberAssignment = m.assignment
			}
			rg.Members = append(rg.Members, dm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	c.reply(id, resp)
}

// listGroups lists this coordinator's groups, filtered by state (v4+,
// case-insensitive) and type (v5+; all groups here are "classic").
func (c *Coordinator) listGroups(id RequestID, r *kmsg.ListGroupsRequest) {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = r.Version
	typeOK := len(r.TypesFilter) == 0
	for _, t := range r.TypesFilter {
		if strings.EqualFold(t, "classic") {
			typeOK = true
		}
	}
	if !typeOK {
		c.reply(id, resp)
		return
	}
	for _, name := range c.sortedGroupIDs() {
		g := c.groups[name]
		if len(r.StatesFilter) > 0 {
			ok := false
			for _, s := range r.StatesFilter {
				ok = ok || strings.EqualFold(s, g.state.String())
			}
			if !ok {
				continue
			}
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = name, g.protocolType, g.state.String(), "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	c.reply(id, resp)
}
