package machines

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/selector"
)

var (
	commitA = strings.Repeat("a", 40)
	commitB = strings.Repeat("b", 40)
)

// healthy is a container of module at gen that its host judges healthy,
// put there by plan at seq.
func healthy(module string, gen int64, plan string, seq uint64) mesh.RunningContainer {
	return mesh.RunningContainer{Module: module, Digest: "sha256:" + module, Generation: gen, Plan: plan, Seq: seq,
		State: mesh.StateRunning, Health: mesh.HealthHealthy, HealthySince: "2026-01-02T03:04:05Z"}
}

// but is c changed by change: a container like a healthy one but for what
// the case is about.
func but(c mesh.RunningContainer, change func(*mesh.RunningContainer)) mesh.RunningContainer {
	change(&c)
	return c
}

// machine is a reading of a machine the config gives modules whose host
// reports cs.
func machine(name string, tier int, modules []string, cs ...mesh.RunningContainer) reading {
	return reading{name: name, m: config.Machine{Host: "http://" + name, Tier: tier, Modules: modules},
		rep: mesh.Report{Machine: name, Containers: cs}}
}

// labelled is r with the labels given as key, value pairs.
func labelled(r reading, kv ...string) reading {
	r.m.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		r.m.Labels[kv[i]] = kv[i+1]
	}
	return r
}

func mustSelector(t *testing.T, s string) selector.Selector {
	t.Helper()
	sel, err := selector.Parse(s)
	require.NoError(t, err)
	return sel
}

// down is a reading of a machine whose host did not answer.
func down(name string, tier int, modules ...string) reading {
	r := machine(name, tier, modules)
	r.hostErr = &host.UnreachableError{URL: "http://" + name, Err: errors.New("connection refused")}
	return r
}

// cell is the part of a row the table below checks.
type cell struct {
	gen     *int64
	commit  string
	plan    string
	behind  *int64
	drift   string
	noneYet bool
	putBack bool
}

func num(n int64) *int64 { return &n }

func TestStatusRows(t *testing.T) {
	hostPlanA, hostPlanB := meshapi.PlanID("host", commitA), meshapi.PlanID("host", commitB)
	ctlPlan := meshapi.PlanID("mesh-controller", commitB)
	for _, tc := range []struct {
		name   string
		rs     []reading
		f      StatusFilter
		want   map[string]cell // by "machine/module"
		newest map[string]int64
	}{
		{
			name: "one machine behind the newest healthy build",
			rs: []reading{
				machine("control-node", 2, []string{"host"}, healthy("host", 4, hostPlanA, 3)),
				machine("edge-1", 1, []string{"host"}, healthy("host", 6, hostPlanB, 5)),
			},
			want: map[string]cell{
				"edge-1/host":       {gen: num(6), commit: commitB, plan: hostPlanB, behind: num(0)},
				"control-node/host": {gen: num(4), commit: commitA, plan: hostPlanA, behind: num(2)},
			},
			newest: map[string]int64{"host": 6},
		},
		{
			name: "a build not yet healthy is not what others are behind",
			rs: []reading{
				machine("edge-1", 1, []string{"host"}, but(healthy("host", 7, hostPlanB, 6), func(c *mesh.RunningContainer) {
					c.State, c.Health, c.HealthySince = mesh.StateStarting, mesh.HealthUnknown, ""
				})),
				machine("edge-2", 1, []string{"host"}, but(healthy("host", 7, hostPlanB, 2), func(c *mesh.RunningContainer) {
					c.State, c.Health = mesh.StateCrashLooping, mesh.HealthUnhealthy
				})),
				machine("control-node", 2, []string{"host"}, healthy("host", 5, hostPlanA, 3)),
			},
			want: map[string]cell{
				"edge-1/host":       {gen: num(7), commit: commitB, plan: hostPlanB, behind: num(0)},
				"edge-2/host":       {gen: num(7), commit: commitB, plan: hostPlanB, behind: num(0)},
				"control-node/host": {gen: num(5), commit: commitA, plan: hostPlanA, behind: num(0)},
			},
			newest: map[string]int64{"host": 5},
		},
		{
			name: "a host that does not judge health counts what runs as healthy",
			rs: []reading{
				machine("edge-1", 1, []string{"host"}, but(healthy("host", 9, hostPlanB, 1), func(c *mesh.RunningContainer) {
					c.Health, c.HealthySince = "", ""
				})),
				machine("edge-2", 1, []string{"host"}, healthy("host", 8, hostPlanA, 1)),
			},
			want: map[string]cell{
				"edge-1/host": {gen: num(9), commit: commitB, plan: hostPlanB, behind: num(0)},
				"edge-2/host": {gen: num(8), commit: commitA, plan: hostPlanA, behind: num(1)},
			},
			newest: map[string]int64{"host": 9},
		},
		{
			name: "healthy nowhere: behind is unknown",
			rs: []reading{
				machine("edge-1", 1, []string{"host"}, but(healthy("host", 3, hostPlanA, 1), func(c *mesh.RunningContainer) {
					c.State, c.Health = mesh.StateExited, mesh.HealthUnhealthy
				})),
			},
			want:   map[string]cell{"edge-1/host": {gen: num(3), commit: commitA, plan: hostPlanA}},
			newest: map[string]int64{},
		},
		{
			name: "drift: a module missing and one unexpected",
			rs: []reading{
				machine("control-node", 2, []string{"mesh-controller", "host"}, healthy("host", 4, hostPlanA, 1)),
				machine("edge-1", 1, []string{"host"}, healthy("host", 4, hostPlanA, 1), healthy("metrics", 2, "by-hand", 2)),
				machine("edge-2", 1, []string{"host"}),
			},
			want: map[string]cell{
				"control-node/host":            {gen: num(4), commit: commitA, plan: hostPlanA, behind: num(0)},
				"control-node/mesh-controller": {drift: DriftMissing, noneYet: true},
				"edge-1/host":                  {gen: num(4), commit: commitA, plan: hostPlanA, behind: num(0)},
				"edge-1/metrics":               {gen: num(2), plan: "by-hand", behind: num(0), drift: DriftUnexpected},
				"edge-2/host":                  {drift: DriftMissing},
			},
			newest: map[string]int64{"host": 4, "metrics": 2},
		},
		{
			name: "commit: as declared, else from the module's own plan, never another module's",
			rs: []reading{
				machine("control-node", 2, []string{"mesh-controller", "host"},
					// host kept as it ran by the controller's plan, on a host
					// not told commits.
					healthy("host", 4, ctlPlan, 2),
					healthy("mesh-controller", 3, ctlPlan, 2)),
				machine("edge-1", 1, []string{"host"}, but(healthy("host", 4, ctlPlan, 2), func(c *mesh.RunningContainer) {
					c.Commit = commitA
				})),
			},
			want: map[string]cell{
				"control-node/host":            {gen: num(4), plan: ctlPlan, behind: num(0)},
				"control-node/mesh-controller": {gen: num(3), commit: commitB, plan: ctlPlan, behind: num(0)},
				"edge-1/host":                  {gen: num(4), commit: commitA, plan: ctlPlan, behind: num(0)},
			},
			newest: map[string]int64{"host": 4, "mesh-controller": 3},
		},
		{
			name: "put back after a plan failed: the failed plan is marked, and lends no commit",
			rs: []reading{
				// edge-1 was put back by hostPlanB's revert (sequence 3), on a
				// host not told commits; edge-2 was too, and then the
				// controller's plan kept it as it ran (sequence 4).
				machine("edge-1", 1, []string{"host"}, but(healthy("host", 4, hostPlanB, 3), func(c *mesh.RunningContainer) {
					c.Introduced = &mesh.Introduction{Plan: hostPlanB, Seq: 3, Revert: true}
				})),
				machine("edge-2", 1, []string{"host"}, but(healthy("host", 4, ctlPlan, 4), func(c *mesh.RunningContainer) {
					c.Commit = commitA
					c.Introduced = &mesh.Introduction{Plan: hostPlanB, Seq: 3, Revert: true}
				})),
			},
			want: map[string]cell{
				"edge-1/host": {gen: num(4), plan: hostPlanB, behind: num(0), putBack: true},
				"edge-2/host": {gen: num(4), commit: commitA, plan: ctlPlan, behind: num(0)},
			},
			newest: map[string]int64{"host": 4},
		},
		{
			name: "a host down: its configured modules with nothing known, and it counts for no newest",
			rs: []reading{
				down("control-node", 2, "mesh-controller", "host"),
				machine("edge-1", 1, []string{"host"}, healthy("host", 4, hostPlanA, 1)),
			},
			want: map[string]cell{
				"control-node/host":            {},
				"control-node/mesh-controller": {},
				"edge-1/host":                  {gen: num(4), commit: commitA, plan: hostPlanA, behind: num(0)},
			},
			newest: map[string]int64{"host": 4},
		},
		{
			name: "one module: rows and newest of it alone",
			f:    StatusFilter{Module: "host"},
			rs: []reading{
				machine("control-node", 2, []string{"mesh-controller", "host"}, healthy("host", 4, hostPlanA, 1), healthy("mesh-controller", 3, ctlPlan, 2)),
				machine("edge-1", 1, []string{"host"}, healthy("host", 5, hostPlanB, 1)),
			},
			want: map[string]cell{
				"control-node/host": {gen: num(4), commit: commitA, plan: hostPlanA, behind: num(1)},
				"edge-1/host":       {gen: num(5), commit: commitB, plan: hostPlanB, behind: num(0)},
			},
			newest: map[string]int64{"host": 5},
		},
		{
			name: "one machine: still behind the rest of the fleet",
			f:    StatusFilter{Machine: "control-node"},
			rs: []reading{
				machine("control-node", 2, []string{"host"}, healthy("host", 4, hostPlanA, 1)),
				machine("edge-1", 1, []string{"host"}, healthy("host", 5, hostPlanB, 1)),
			},
			want:   map[string]cell{"control-node/host": {gen: num(4), commit: commitA, plan: hostPlanA, behind: num(1)}},
			newest: map[string]int64{"host": 5},
		},
		{
			name: "the machines a selector picks: still behind the rest of the fleet",
			f:    StatusFilter{Selector: mustSelector(t, "ring=canary")},
			rs: []reading{
				labelled(machine("edge-1", 1, []string{"host"}, healthy("host", 4, hostPlanA, 1)), "ring", "canary"),
				labelled(machine("edge-2", 1, []string{"host"}, healthy("host", 4, hostPlanA, 1)), "ring", "main"),
				machine("edge-3", 2, []string{"host"}, healthy("host", 5, hostPlanB, 1)),
			},
			want:   map[string]cell{"edge-1/host": {gen: num(4), commit: commitA, plan: hostPlanA, behind: num(1)}},
			newest: map[string]int64{"host": 5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(tc.rs, tc.f)
			got := map[string]cell{}
			for _, r := range st.Rows {
				got[r.Machine+"/"+r.Module] = cell{gen: r.Generation, commit: r.Commit, plan: r.Plan, behind: r.Behind, drift: r.Drift, noneYet: r.NoneYet, putBack: r.PutBack}
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.newest, st.NewestHealthy)
		})
	}
}

// Rows are sorted by tier, machine and module; machines by tier and name;
// a row carries the host's own words about its container, and a host's
// error on every row it leaves unknown.
func TestStatusRowDetail(t *testing.T) {
	c := healthy("host", 4, meshapi.PlanID("host", commitA), 7)
	c.Restarts, c.Digest, c.Env = 2, "sha256:"+strings.Repeat("d", 64), map[string]string{"SECRET": "x"}
	st := statusOf([]reading{
		machine("edge-2", 1, []string{"host"}, c),
		down("control-node", 0, "host"),
		machine("edge-1", 1, []string{"metrics", "host"}),
	}, StatusFilter{})
	var order []string
	for _, r := range st.Rows {
		order = append(order, r.Machine+"/"+r.Module)
	}
	assert.Equal(t, []string{"control-node/host", "edge-1/host", "edge-1/metrics", "edge-2/host"}, order)
	var machines []string
	for _, m := range st.Machines {
		machines = append(machines, m.Machine)
	}
	assert.Equal(t, []string{"control-node", "edge-1", "edge-2"}, machines)

	assert.Equal(t, "host http://control-node: unreachable: connection refused", st.Rows[0].HostError)
	assert.Equal(t, HostUnreachable, st.Machines[0].HostStatus)
	assert.Equal(t, st.Rows[0].HostError, st.Machines[0].HostError, "one wording in both places")
	assert.Empty(t, st.Rows[1].HostError)

	seq := uint64(7)
	assert.Equal(t, StatusRow{Machine: "edge-2", Tier: 1, Module: "host", Generation: num(4), Commit: commitA,
		Digest: c.Digest, State: mesh.StateRunning, Health: mesh.HealthHealthy, HealthySince: "2026-01-02T03:04:05Z",
		Restarts: 2, Plan: meshapi.PlanID("host", commitA), Seq: &seq, Behind: num(0)}, st.Rows[3])
}

func TestReadStatus(t *testing.T) {
	e1, _ := fakeHost(t, mesh.Report{Machine: "edge-1", LastSeq: 3, Containers: []mesh.RunningContainer{
		healthy("host", 5, meshapi.PlanID("host", commitB), 3),
	}}, 0)
	cn, _ := fakeHost(t, mesh.Report{Machine: "control-node", LastSeq: 2, Containers: []mesh.RunningContainer{
		healthy("host", 4, meshapi.PlanID("host", commitA), 2),
	}}, 0)
	cfg := &config.Config{Machines: map[string]config.Machine{
		"control-node": {Host: cn, Tier: 2, Modules: []string{"mesh-controller", "host"}},
		"edge-1":       {Host: e1, Tier: 1, Modules: []string{"host"}},
		"edge-2":       {Host: dead, Tier: 1, Modules: []string{"host"}},
	}}

	// Without Temporal: the hosts' part, and the error.
	st, err := ReadStatus(context.Background(), cfg, Sources{Dial: noTemporal}, StatusFilter{})
	require.ErrorIs(t, err, errTemporal)
	require.Len(t, st.Rows, 4)
	assert.False(t, st.AskedAt.IsZero())
	assert.Equal(t, map[string]int64{"host": 5}, st.NewestHealthy)
	for _, m := range st.Machines {
		assert.Equal(t, errTemporal.Error(), m.WorkflowError, m.Machine)
		assert.Nil(t, m.Queue, m.Machine)
	}
	assert.Equal(t, "edge-2", st.Rows[1].Machine)
	assert.Contains(t, st.Rows[1].HostError, "unreachable")
	require.NotNil(t, st.Rows[2].Behind)
	assert.Equal(t, "control-node/host", st.Rows[2].Machine+"/"+st.Rows[2].Module)
	assert.Equal(t, int64(1), *st.Rows[2].Behind, "control-node's host is one behind edge-1's")

	// With Temporal: each machine's queue, said once for the machine.
	cur := &meshapi.QueuedRequest{Request: "r", Plan: meshapi.PlanID("host", commitB), Module: "host", Generation: 5}
	tc := temporal{states: map[string]meshapi.MachineState{
		"control-node": {LastSeq: 2, Current: cur, Queue: []meshapi.QueuedRequest{{Plan: "q"}}},
		"edge-1":       {LastSeq: 3, Queue: []meshapi.QueuedRequest{}},
	}}
	st, err = ReadStatus(context.Background(), cfg, Sources{Dial: tc.dial}, StatusFilter{})
	require.NoError(t, err)
	require.Len(t, st.Machines, 3)
	assert.Equal(t, "edge-1", st.Machines[0].Machine)
	assert.Equal(t, 0, *st.Machines[0].Queue)
	assert.Nil(t, st.Machines[1].Queue, "edge-2 has no workflow yet")
	assert.Empty(t, st.Machines[1].WorkflowError, "no workflow yet is not an error")
	assert.Equal(t, "control-node", st.Machines[2].Machine)
	assert.Equal(t, 1, *st.Machines[2].Queue)
	assert.Equal(t, cur, st.Machines[2].Current)

	// One machine: its rows and workflow alone, behind the whole fleet.
	st, err = ReadStatus(context.Background(), cfg, Sources{Dial: tc.dial}, StatusFilter{Machine: "control-node", Module: "host"})
	require.NoError(t, err)
	require.Len(t, st.Machines, 1)
	require.Len(t, st.Rows, 1)
	assert.Equal(t, int64(1), *st.Rows[0].Behind)
}
