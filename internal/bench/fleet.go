package main

import (
	"context"
	"fmt"

	historypb "go.temporal.io/api/history/v1"

	"github.com/meshroll/meshroll/internal/bench/hist"
	"github.com/meshroll/meshroll/internal/bench/stack"
)

// fleetModule is the one module a fleet's machines run: the fan-out and
// batched scenarios push it with one plan.
const fleetModule = "app"

// fleetSpecs names n machines prefix-h0000… running fleetModule and spreads
// them over tiers tiers in order, as evenly as n allows (the first ones on
// tier 1).
func fleetSpecs(prefix string, n, tiers int) []stack.MachineSpec {
	specs := make([]stack.MachineSpec, n)
	for i := range specs {
		specs[i] = stack.MachineSpec{Name: fmt.Sprintf("%s-h%04d", prefix, i), Tier: 1 + i*tiers/n, Modules: []string{fleetModule}}
	}
	return specs
}

// startFleet makes a mesh of specs running fleetModule, on queue, and
// starts its worker; o sets the mesh's health and tier policies. A mesh
// that could not start is closed.
func (b *bench) startFleet(ctx context.Context, queue string, specs []stack.MachineSpec, o stack.MeshOptions) (*stack.Mesh, error) {
	o.TaskQueue, o.Machines, o.Modules, o.Log = queue, specs, []string{fleetModule}, b.log
	m, err := stack.NewMesh(ctx, b.srv, o)
	if err != nil {
		return nil, err
	}
	if err := m.StartWorker(ctx); err != nil {
		_ = m.Close()
		return nil, err
	}
	return m, nil
}

// planFleet commits a change, runs one plan of fleetModule to converged
// and returns the plan's history.
func (b *bench) planFleet(ctx context.Context, m *stack.Mesh) ([]*historypb.HistoryEvent, error) {
	commit, err := m.Commit(ctx)
	if err != nil {
		return nil, err
	}
	c := b.srv.Client()
	ids, err := rollOut(ctx, c, m, []string{fleetModule}, commit)
	if err != nil {
		return nil, err
	}
	return hist.Events(ctx, c, ids[0])
}
