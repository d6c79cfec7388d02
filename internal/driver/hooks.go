package driver

import (
	"time"

	"github.com/wasmassign/wasmassign/coordinator"
)

// Hook observes the driver, for metrics: franz-go's kgo.Hook is the model.
// A Hook implements any of the interfaces below, and the driver calls each
// one it implements. Hooks run on the driver's goroutines, the loop
// included, so they must be quick and must not call the driver. The driver
// itself imports no metrics library; the daemon's hooks feed Prometheus.
type Hook any

// HookPluginCall is called after every assignor call, with its duration
// and, for a failed call, the error's stable reason (the runtime's
// Error.Reason, or "error"); reason is empty for a call that succeeded.
type HookPluginCall interface {
	OnPluginCall(assignor string, took time.Duration, reason string)
}

// HookFallback is called when a group's assignment moves on from a failed
// assignor to the next of its chain.
type HookFallback interface {
	OnFallback(from, to string)
}

// HookRebalance is called for every completed rebalance.
type HookRebalance interface {
	OnRebalance(group string, generation int32, r Rebalance)
}

// HookGroupState is called after every step of the coordinator that
// changed a group (a member joined or left, the group changed state or
// generation, an assignment completed), and for every restored group at
// start, with the group as the coordinator has it at the end of the step:
// the same summary the admin API reads, so per-group gauges fed from it
// agree with the API in every state.
type HookGroupState interface {
	OnGroupState(s coordinator.Summary)
}

// HookGroupRemoved is called instead of HookGroupState when, at the end of
// a step that named a group, the coordinator no longer holds it (it turned
// Dead: deleted, or its retention ended), so that per-group series can go
// with it. It may be called again for a group already removed.
type HookGroupRemoved interface {
	OnGroupRemoved(group string)
}

// HookRebalanceStorm is called once per storm window for a group that
// rebalances too often, with the likely cause as a short label from a fixed
// set.
type HookRebalanceStorm interface {
	OnRebalanceStorm(group, cause string)
}

// HookAssignmentTimedOut is called when no assignor answered a group
// within the coordinator's assignment timeout, and the coordinator handed
// out its own range assignment instead.
type HookAssignmentTimedOut interface {
	OnAssignmentTimedOut(group string)
}

// HookPluginOverload is called when an assignor call never ran because the
// plugin host had no instance for it in time: an overload, not a failure
// of the plugin. The coordinator asks the same assignor again.
type HookPluginOverload interface {
	OnPluginOverload(assignor string)
}

// HookUpstreamError is called when a forward to the upstream cluster
// fails; kind is "forward".
type HookUpstreamError interface {
	OnUpstreamError(kind string)
}

// each calls fn with every hook of type H.
func each[H any](hooks []Hook, fn func(H)) {
	for _, h := range hooks {
		if h, ok := h.(H); ok {
			fn(h)
		}
	}
}
