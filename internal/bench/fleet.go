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

// newFleet makes a mesh of specs running fleetModule, on queue, with no
// worker yet; o sets the mesh's health and tier policies.
func (b *bench) newFleet(ctx context.Context, queue string, specs []stack.MachineSpec, o stack.MeshOptions) (*stack.Mesh, error) {
	o.TaskQueue, o.Machines, o.Modules, o.Log = queue, specs, []string{fleetModule}, b.log
	return stack.NewMesh(ctx, b.srv, o)
}

// startFleet is newFleet with its worker started in this process. A mesh
// that could not start is closed.
func (b *bench) startFleet(ctx context.Context, queue string, specs []stack.MachineSpec, o stack.MeshOptions) (*stack.Mesh, error) {
	m, err := b.newFleet(ctx, queue, specs, o)
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
	return b.events(ctx, ids[0])
}

// events is a workflow's history, kept in Options.Histories when set.
func (b *bench) events(ctx context.Context, id string) ([]*historypb.HistoryEvent, error) {
	events, err := hist.Events(ctx, b.srv.Client(), id)
	if err != nil || b.o.Histories == "" {
		return events, err
	}
	return events, hist.Keep(b.o.Histories, id, events)
}
