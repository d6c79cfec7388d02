package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/config"
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
