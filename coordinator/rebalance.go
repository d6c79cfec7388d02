package coordinator

import "time"

// Rebalance starts a rebalance of one group for a reason from outside it,
// such as a new version of the plugin that assigns it. Only a server-side
// group that is Stable or CompletingRebalance rebalances: a group already
// rebalancing will run the new plugin anyway, and an Empty group has no
// one to tell. Its members learn it from Heartbeat REBALANCE_IN_PROGRESS.
// An unknown group is no error; the output is then empty.
func (c *Coordinator) Rebalance(now time.Time, groupID, reason string) Output {
	c.begin(now)
	if g, ok := c.groups[groupID]; ok && g.serverSide && (g.state == Stable || g.state == CompletingRebalance) {
		c.touch(g)
		c.prepareRebalance(g, reason)
	}
	return c.finish()
}
