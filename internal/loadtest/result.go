package loadtest

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Result is what one target did under the load.
type Result struct {
	// Target and Address say what was measured; Embedded is set for the
	// kfake cluster the generator started, in a process of its own.
	Target   string `json:"target"`
	Address  string `json:"address"`
	Embedded bool   `json:"embedded"`

	// The load: groups, members per group and in all, partitions per
	// group (every topic's), the protocol, and the shared connections
	// per address (0: one per member).
	Groups            int    `json:"groups"`
	MembersPerGroup   int    `json:"members_per_group"`
	Members           int    `json:"members"`
	Partitions        int    `json:"partitions_per_group"`
	Protocol          string `json:"protocol"`
	SharedConnections int    `json:"shared_connections"`

	// Connect is how long every member took to connect and find its
	// coordinator, before the first JoinGroup.
	Connect time.Duration `json:"connect_ns"`
	// Stable reports whether every group became stable within the
	// stable timeout. JoinToStable is the time from the first JoinGroup
	// sent until every group had all its members answered by SyncGroup
	// at one generation with no revocation pending, in a state that then
	// held for max(3 heartbeats, 1s).
	Stable       bool          `json:"stable"`
	JoinToStable time.Duration `json:"join_to_stable_ns"`
	// UnstableGroups counts the groups not stable at the timeout, and
	// Unstable describes the first few.
	UnstableGroups int      `json:"unstable_groups,omitempty"`
	Unstable       []string `json:"unstable,omitempty"`

	// Steady is the steady phase's length; the rest is measured in it.
	Steady time.Duration `json:"steady_ns"`
	// Heartbeat and Commit are the round trips of heartbeats and
	// commits sent in the steady phase.
	Heartbeat Latency `json:"heartbeat"`
	Commit    Latency `json:"commit"`
	// Offered counts what the members' schedules called for in the
	// steady phase (a member with no partitions commits nothing);
	// Answered, what the target answered with no error.
	HeartbeatsOffered  int64 `json:"heartbeats_offered"`
	HeartbeatsAnswered int64 `json:"heartbeats_answered"`
	CommitsOffered     int64 `json:"commits_offered"`
	CommitsAnswered    int64 `json:"commits_answered"`
	// The same per second of the steady phase.
	HeartbeatsOfferedPerSec  float64 `json:"heartbeats_offered_per_sec"`
	HeartbeatsAnsweredPerSec float64 `json:"heartbeats_answered_per_sec"`
	CommitsOfferedPerSec     float64 `json:"commits_offered_per_sec"`
	CommitsAnsweredPerSec    float64 `json:"commits_answered_per_sec"`
	// SteadyJoins counts the JoinGroups sent in the steady phase: zero
	// unless something rebalanced a group.
	SteadyJoins int64 `json:"steady_joins"`
	// Revocations counts KIP-429 hand-overs: a member that synced,
	// revoked partitions its assignment dropped, and rejoined.
	Revocations int64 `json:"revocations"`

	// Errors counts, per API, each error code the target answered with
	// until the members stop, by kerr's names; "connection lost" counts
	// requests whose connection failed. MEMBER_ID_REQUIRED (one per
	// member) and REBALANCE_IN_PROGRESS in the join phase are the
	// protocol working as designed.
	Errors map[string]map[string]int64 `json:"errors"`

	// Assignment checks each group's assignment when it became stable:
	// every partition held by exactly one member. AssignmentAtEnd is
	// the same check when the steady phase ended, nil if the groups
	// were not stable then.
	Assignment      AssignmentCheck  `json:"assignment"`
	AssignmentAtEnd *AssignmentCheck `json:"assignment_at_end,omitempty"`

	// Process is the target's CPU and memory, nil when it was not
	// sampled (no --pid).
	Process *Process `json:"process,omitempty"`
	// GeneratorCPUPerHeartbeat is the generator's own CPU time in the
	// steady phase per heartbeat answered, in microseconds.
	GeneratorCPUPerHeartbeat float64 `json:"generator_cpu_per_heartbeat_us"`

	// assignments are the members' last assignments, per group, for
	// tests.
	assignments [][][]kmsg.ConsumerMemberAssignmentTopic
}

// rate is n per second of d.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// AssignmentCheck is the outcome of checking every group's assignment.
type AssignmentCheck struct {
	// Groups were checked; Valid had every partition held exactly once.
	Groups int `json:"groups"`
	Valid  int `json:"valid"`
	// Problems names the first few invalid groups and what is wrong.
	Problems []string `json:"problems,omitempty"`
}

// Process is a target process's use of the machine, with its
// descendants (the gateway's plugin workers).
type Process struct {
	// PID is the process sampled.
	PID int `json:"pid"`
	// CPUSeconds is the CPU time used over the whole run, and
	// SteadyCPUSeconds in the steady phase.
	CPUSeconds       float64 `json:"cpu_seconds"`
	SteadyCPUSeconds float64 `json:"steady_cpu_seconds"`
	// CPUPerHeartbeat is SteadyCPUSeconds per heartbeat answered, in
	// microseconds (commits included in the CPU).
	CPUPerHeartbeat float64 `json:"cpu_per_heartbeat_us"`
	// PeakRSS is the highest sum of the processes' resident memory seen
	// (sampled every 250 ms), and RSSPer1000Members that per thousand
	// members.
	PeakRSS           int64 `json:"peak_rss_bytes"`
	RSSPer1000Members int64 `json:"rss_per_1000_members_bytes"`
	// PeakPSS and PSSPer1000Members are the same for the sum of the
	// processes' proportional set sizes, in which pages that several
	// processes map (the binary a gateway and its workers share) count
	// once in all: the memory the tree costs the machine, where the sum of
	// RSS counts such pages once per process. Zero where the kernel does
	// not report it.
	PeakPSS           int64 `json:"peak_pss_bytes,omitempty"`
	PSSPer1000Members int64 `json:"pss_per_1000_members_bytes,omitempty"`
	// PeakProcesses is the most processes the tree had at once.
	PeakProcesses int `json:"peak_processes"`
	// SampleError is set when sampling failed part-way (the process
	// exited).
	SampleError string `json:"sample_error,omitempty"`
}

// Ratios compares a target with the reference, the first of the run:
// each is the target's figure over the reference's, nil when either side
// lacks it.
type Ratios struct {
	Target            string   `json:"target"`
	Reference         string   `json:"reference"`
	JoinToStable      *float64 `json:"join_to_stable"`
	HeartbeatP99      *float64 `json:"heartbeat_p99"`
	CommitP99         *float64 `json:"commit_p99"`
	CPUPerHeartbeat   *float64 `json:"cpu_per_heartbeat"`
	RSSPer1000Members *float64 `json:"rss_per_1000_members"`
	PSSPer1000Members *float64 `json:"pss_per_1000_members"`
}

// Compare returns target's ratios against ref.
func Compare(ref, target *Result) Ratios {
	ratio := func(t, r float64, ok bool) *float64 {
		if !ok || r <= 0 || t <= 0 {
			return nil
		}
		v := t / r
		return &v
	}
	rt := Ratios{Target: target.Target, Reference: ref.Target}
	bothStable := ref.Stable && target.Stable
	rt.JoinToStable = ratio(float64(target.JoinToStable), float64(ref.JoinToStable), bothStable)
	rt.HeartbeatP99 = ratio(float64(target.Heartbeat.P99), float64(ref.Heartbeat.P99), bothStable)
	rt.CommitP99 = ratio(float64(target.Commit.P99), float64(ref.Commit.P99), bothStable)
	if ref.Process != nil && target.Process != nil {
		rt.CPUPerHeartbeat = ratio(target.Process.CPUPerHeartbeat, ref.Process.CPUPerHeartbeat, bothStable)
		rt.RSSPer1000Members = ratio(float64(target.Process.RSSPer1000Members), float64(ref.Process.RSSPer1000Members), true)
		rt.PSSPer1000Members = ratio(float64(target.Process.PSSPer1000Members), float64(ref.Process.PSSPer1000Members), true)
	}
	return rt
}
