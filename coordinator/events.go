package coordinator

// EventKind says what happened in a group. Events exist for metrics and
// logs; nothing in the coordinator depends on them.
type EventKind uint8

const (
	// EventStateChanged: the group entered the state in Event.State.
	EventStateChanged EventKind = iota + 1
	// EventRebalanceStarted: the group entered PreparingRebalance; Detail
	// says why.
	EventRebalanceStarted
	// EventMemberAdded: a member joined.
	EventMemberAdded
	// EventMemberRemoved: a member left; Detail says why.
	EventMemberRemoved
	// EventAssignmentStarted: a Job was issued.
	EventAssignmentStarted
	// EventAssignmentFailed: a Job failed and the next assignor runs;
	// Detail holds the error.
	EventAssignmentFailed
	// EventAssignmentCompleted: the group received its assignment; N is the
	// number of partitions withheld for KIP-429, Moved the number that
	// change owner, Detail the assignor that answered, Attempt how many
	// assignors failed before it, Members the group's size and Cooperative
	// whether the group rebalances incrementally (KIP-429).
	EventAssignmentCompleted
	// EventStaleAssignment: a Job completed for a generation that is gone.
	EventStaleAssignment
	// EventMetadataChanged: subscribed topic metadata changed under a group.
	EventMetadataChanged
	// EventMetadataAwaited: the group's assignment waits for metadata of
	// the topics in Detail (comma-separated), at most Config.MetadataWait.
	EventMetadataAwaited
	// EventAssignmentTimedOut: no assignor answered within
	// Config.AssignmentTimeout of the join phase's end; the range plugin's
	// assignment, computed by the coordinator, is handed out instead.
	// Detail says what the group was waiting for.
	EventAssignmentTimedOut
	// EventAssignmentDeferred: the runner had no room for a Job in time
	// (an error wrapping ErrRunnerBusy); the same assignor is asked again,
	// with Config.AssignmentTimeout still bounding the wait. Detail holds
	// the error, N the attempt.
	EventAssignmentDeferred
	// EventGroupCreated: a JoinGroup the coordinator accepted created the
	// group, Empty at generation 0. Its member follows with
	// EventMemberAdded, unless KIP-394 sends it back for its member id
	// first: until it returns the group has no member.
	EventGroupCreated
	// EventUnloaded: Unload gave the group up to another coordinator; it
	// did not end, and this coordinator no longer holds it.
	EventUnloaded
	// EventMemberSynced: Member was answered its assignment of Generation
	// (a SyncGroup): what it holds changed, and a coordinator that takes
	// the group over must know it.
	EventMemberSynced
	// EventMemberRack: a Fetch rack sighting (KIP-392) gave Member the rack
	// in Detail; the group does not rebalance for it.
	EventMemberRack
)

// Event is one observable change.
type Event struct {
	Kind       EventKind
	Group      string
	Generation int32
	Member     string
	State      State
	Detail     string
	N          int
	Moved      int
	Attempt    int
	Members    int
	// Cooperative is set on EventAssignmentCompleted.
	Cooperative bool
	// RackLocal and RackKnown, on EventAssignmentCompleted, count the
	// assigned partitions with a replica in their member's rack, among
	// those whose member and replicas have known racks.
	RackLocal, RackKnown int
	// Unassigned, on EventAssignmentCompleted, counts subscribed partitions
	// no member received (withheld ones included).
	Unassigned int
}

func (c *Coordinator) event(e Event) { c.out.Events = append(c.out.Events, e) }
