package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/driver"
	"github.com/wasmassign/wasmassign/internal/metrics"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// groupConfig turns one [[groups]] rule into the coordinator's terms.
func groupConfig(g *config.Group, racks []coordinator.RackRule) coordinator.GroupConfig {
	gc := coordinator.GroupConfig{
		Priority:              slices.Clone(g.Priority),
		Assignor:              g.Assignor,
		Fallback:              g.Fallback,
		PluginConfig:          g.Config,
		InitialRebalanceDelay: g.InitialRebalanceDelay,
		MinSessionTimeout:     g.MinSessionTimeout,
		MaxSessionTimeout:     g.MaxSessionTimeout,
		MaxSize:               g.MaxSize,
	}
	if gc.InitialRebalanceDelay == 0 {
		gc.InitialRebalanceDelay = -1 // zero in the file means none
	}
	gc.RackRules = racks
	return gc
}

// pluginSet runs the driver's assignment jobs on the registry's plugins.
type pluginSet struct{ reg *wasmruntime.Registry }

func (p pluginSet) Assign(ctx context.Context, name string, req *abi.Request) (*abi.Response, error) {
	a, ok := p.reg.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no loaded plugin provides assignor %q", name)
	}
	return a.Assign(ctx, req)
}

// driverHooks feeds the driver's hooks into the daemon's Prometheus
// metrics: the driver knows nothing of Prometheus, and the metrics package
// nothing of the driver.
type driverHooks struct{ m *metrics.Metrics }

func (h driverHooks) OnPluginCall(assignor string, took time.Duration, reason string) {
	h.m.PluginCall(assignor, took, reason)
}

func (h driverHooks) OnFallback(from, to string) { h.m.Fallback(from, to) }

func (h driverHooks) OnRebalance(_ string, _ int32, r driver.Rebalance) {
	h.m.RebalanceDone(metrics.Rebalance{
		Assignor: r.Assignor, Cooperative: r.Cooperative,
		Duration: r.Duration, Moved: r.Moved, Withheld: r.Withheld,
	})
}

// OnGroupState is the per-group gauges' one source: the coordinator's
// summary after every step that changed the group, the same the admin API
// reads.
func (h driverHooks) OnGroupState(s coordinator.Summary) {
	h.m.GroupChanged(metrics.Group{
		Group: s.Group, Generation: s.Generation, Members: s.Members,
		Unassigned: s.Unassigned, RackLocal: s.RackLocal, RackKnown: s.RackKnown,
	})
}

func (h driverHooks) OnGroupRemoved(group string) { h.m.GroupRemoved(group) }

func (h driverHooks) OnRebalanceStorm(group, cause string) { h.m.RebalanceStorm(group, cause) }

func (h driverHooks) OnUpstreamError(kind string) { h.m.UpstreamError(kind) }

func (h driverHooks) OnAssignmentTimedOut(string) { h.m.AssignmentTimedOut() }

func (h driverHooks) OnPluginOverload(assignor string) { h.m.PluginOverload(assignor) }

// hostHooks feeds the plugin host's hooks into the metrics.
type hostHooks struct{ m *metrics.Metrics }

func (h hostHooks) OnQueueWait(plugin string, wait time.Duration, overloaded bool) {
	h.m.PluginQueueWait(filepath.Base(plugin), wait)
}

var _ wasmruntime.HookQueueWait = hostHooks{}

// The daemon's metrics miss nothing the driver reports.
var _ interface {
	driver.HookPluginCall
	driver.HookFallback
	driver.HookRebalance
	driver.HookGroupState
	driver.HookGroupRemoved
	driver.HookRebalanceStorm
	driver.HookUpstreamError
	driver.HookAssignmentTimedOut
	driver.HookPluginOverload
} = driverHooks{}
