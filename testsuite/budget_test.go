package testsuite

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// budgetMesh is three modules, each on two machines of one tier pushed all
// at once, under a fleet-wide max_unavailable of 1.
func budgetMesh() stackOptions {
	o := stackOptions{modules: []string{"alpha", "beta", "gamma"}, push: "{max_unavailable: 1}", health: "{min_healthy: 1s}"}
	for _, m := range o.modules {
		for i := 1; i <= 2; i++ {
			o.machines = append(o.machines, machineSpec{name: fmt.Sprintf("%s-%d", m, i), tier: 1, modules: []string{m}})
		}
	}
	return o
}

// A fleet-wide max_unavailable of 1 holds across two concurrent plans of
// different modules and a rollback of a third, each of whose tiers would
// push both its machines at once: the hosts' own journals show no two
// machines of the fleet in flight at any moment. A machine waiting for its
// place says so, and behind whom. (Without the budget each plan pushes its
// two machines together, and their windows overlap.)
func TestFleetBudgetHoldsAcrossConcurrentPlansAndARollback(t *testing.T) {
	t.Parallel()
	s := newStack(t, budgetMesh())
	ids := s.contendForBudget()

	var all []window
	for module, id := range ids {
		st := s.wait(id)
		require.Equal(t, meshapi.PlanConverged, st.State, "%s: %s", id, st.Reason)
		for i := 1; i <= 2; i++ {
			all = append(all, s.windowOf(fmt.Sprintf("%s-%d", module, i), id))
		}
	}
	for i, w := range all {
		for _, o := range all[i+1:] {
			require.False(t, w.overlaps(o), "%s and %s were unavailable at once (all: %v)", w, o, all)
		}
	}
	// The last push's plan hears its answer before its machine workflow
	// gives the lease back.
	var budget meshapi.FleetBudgetState
	require.Eventually(t, func() bool {
		v, err := s.c.QueryWorkflow(context.Background(), meshapi.FleetBudgetID(s.cfg.Temporal.TaskQueue), "", meshapi.QueryState)
		return err == nil && v.Get(&budget) == nil && len(budget.Leases) == 0 && len(budget.Waiting) == 0
	}, time.Minute, 50*time.Millisecond, "every lease given back, none waiting")
	require.Equal(t, 1, budget.Limit)
}

// contendForBudget converges alpha twice, then rolls it back while its
// hosts hold the rollback's first push in flight, and merges beta and
// gamma meanwhile: their machines wait for the fleet budget, saying so
// and behind whom, until the hosts let go. It returns each module's plan
// (alpha's: the rollback's).
func (s *stack) contendForBudget() map[string]string {
	s.t.Helper()
	s.converge("alpha", s.commit("alpha"))
	s.converge("alpha", s.commit("alpha"))

	releaseA1, releaseA2 := s.hosts["alpha-1"].Hold(), s.hosts["alpha-2"].Hold()
	var once sync.Once
	release := func() { once.Do(func() { releaseA1(); releaseA2() }) }
	// A test that fails while the hosts hold lets them go before the
	// stack stops.
	s.t.Cleanup(release)
	rb, err := plans.Start(context.Background(), s.c, s.cfg.Temporal.TaskQueue, meshapi.PlanInput{
		Module: "alpha", Policy: s.cfg.PushPolicy(), Rollback: &meshapi.Rollback{By: "test", Reason: "on fire"},
	})
	require.NoError(s.t, err)
	// The rollback's first push holds the fleet's one lease, at its held
	// host, before the merges start: a merge's machine that asked first
	// would take the lease and push at once, with nothing behind alpha.
	require.Eventually(s.t, func() bool {
		v, err := s.c.QueryWorkflow(context.Background(), meshapi.FleetBudgetID(s.cfg.Temporal.TaskQueue), "", meshapi.QueryState)
		var b meshapi.FleetBudgetState
		if err != nil || v.Get(&b) != nil {
			return false
		}
		return slices.ContainsFunc(b.Leases, func(l meshapi.Lease) bool { return l.Module == "alpha" })
	}, 2*time.Minute, 50*time.Millisecond, "the rollback's first push holds the fleet budget's lease")
	beta, gamma := s.start("beta", s.commit("beta")).ID, s.start("gamma", s.commit("gamma")).ID
	for _, m := range []string{"beta-1", "beta-2", "gamma-1", "gamma-2"} {
		st := s.stateOf(m, func(st meshapi.MachineState) bool {
			return st.BudgetWait != "" && strings.Contains(st.BudgetWait, "pushing alpha")
		})
		require.Regexp(s.t, `^waiting for the fleet budget: 1 of 1 unavailable \(alpha-[12] pushing alpha\)(, [1-4] ahead in line)?$`, st.BudgetWait, m)
	}
	// The line stands still while the hosts hold: what a reader is told
	// of each machine's place is the budget's line now, not the words the
	// budget sent when that machine began to wait.
	v, err := s.c.QueryWorkflow(context.Background(), meshapi.FleetBudgetID(s.cfg.Temporal.TaskQueue), "", meshapi.QueryState)
	require.NoError(s.t, err)
	var line meshapi.FleetBudgetState
	require.NoError(s.t, v.Get(&line))
	for _, m := range []string{"beta-1", "beta-2", "gamma-1", "gamma-2"} {
		st, err := plans.MachineState(context.Background(), s.c, m)
		require.NoError(s.t, err)
		require.Equal(s.t, meshapi.FleetBudgetID(s.cfg.Temporal.TaskQueue), st.BudgetWorkflow, m)
		want, ok := line.WaitWords(st.Current.Request)
		require.True(s.t, ok, "%s waits in the budget's line", m)
		require.Equal(s.t, want, st.BudgetWait, "%s's place in line as it is now", m)
	}
	out, err := s.starter("plan", "show", beta)
	require.NoError(s.t, err, out)
	require.Regexp(s.t, `(?m)^1 \(pushing\)\s+beta-1\s+pushing\s+-\s+waiting for the fleet budget: 1 of 1 unavailable \(alpha-[12] pushing alpha\)`, out, "plan show says why")
	out, err = s.starter("machine", "show", "gamma-2")
	require.NoError(s.t, err, out)
	require.Regexp(s.t, `(?m)^waiting for the fleet budget: 1 of 1 unavailable \(alpha-[12] pushing alpha\)`, out, "machine show says why")
	release()
	return map[string]string{"alpha": rb.ID, "beta": beta, "gamma": gamma}
}

// TestCaptureFleetBudgetHistories records the fleet budget's workflow and
// machine workflows that pushed only with its lease (change
// fleet-budget): a rollback's, and a merge's that waited behind it. Like
// the other captures it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureFleetBudgetHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	s := captureStack(t, budgetMesh())
	for _, id := range s.contendForBudget() {
		require.Equal(t, meshapi.PlanConverged, s.wait(id).State)
	}
	require.Eventually(t, func() bool {
		var budget meshapi.FleetBudgetState
		v, err := s.c.QueryWorkflow(context.Background(), meshapi.FleetBudgetID(s.cfg.Temporal.TaskQueue), "", meshapi.QueryState)
		return err == nil && v.Get(&budget) == nil && len(budget.Leases) == 0
	}, time.Minute, 50*time.Millisecond)
	s.writeHistories(
		capturedRun{"fleet-budget-granted", meshapi.FleetBudgetID(s.cfg.Temporal.TaskQueue), ""},
		capturedRun{"machine-leased-rollback", meshapi.MachineID("alpha-1"), ""},
		capturedRun{"machine-leased-after-wait", meshapi.MachineID("beta-1"), ""},
	)
}

// stateOf waits until machine's workflow answers its state query with one
// ready accepts, and returns it.
func (s *stack) stateOf(machine string, ready func(meshapi.MachineState) bool) meshapi.MachineState {
	s.t.Helper()
	// The last state read, for the failure: the condition runs apart
	// from the test, and a message's arguments are read before it runs.
	var (
		mu   sync.Mutex
		last meshapi.MachineState
	)
	got := func() meshapi.MachineState {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	if !assert.Eventually(s.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := s.c.QueryWorkflow(ctx, meshapi.MachineID(machine), "", meshapi.QueryState)
		var st meshapi.MachineState
		if err != nil || v.Get(&st) != nil {
			return false
		}
		mu.Lock()
		last = st
		mu.Unlock()
		return ready(st)
	}, 2*time.Minute, 50*time.Millisecond) {
		s.t.Fatalf("machine workflow of %s never reached the state waited for (last: %+v)", machine, got())
	}
	return got()
}

// A lease granted to a machine workflow that does not run is dropped as
// soon as its grant cannot be delivered, on a real server: the fleet is not
// held up by it, and the next merge converges.
func TestFleetBudgetDropsALeaseWhoseMachineWorkflowIsGone(t *testing.T) {
	t.Parallel()
	o := stackOptions{modules: []string{"alpha"}, push: "{max_unavailable: 1}", health: "{min_healthy: 1s}",
		machines: []machineSpec{{name: "alpha-1", tier: 1, modules: []string{"alpha"}}}}
	s := newStack(t, o)
	id := meshapi.FleetBudgetID(s.cfg.Temporal.TaskQueue)
	ghost := meshapi.LeaseAsk{Machine: "ghost", Request: "plan/alpha/x@ghost", Plan: "plan/alpha/x", Module: "alpha",
		Budget: meshapi.FleetBudget{MaxUnavailable: 1, FleetSize: 1}, Hold: time.Hour}
	_, err := s.c.SignalWithStartWorkflow(context.Background(), id, meshapi.SignalLeaseAsk, ghost,
		client.StartWorkflowOptions{ID: id, TaskQueue: s.cfg.Temporal.TaskQueue}, meshapi.FleetBudgetWorkflowType, meshapi.FleetBudgetInput{})
	require.NoError(t, err)
	var budget meshapi.FleetBudgetState
	require.Eventually(t, func() bool {
		v, err := s.c.QueryWorkflow(context.Background(), id, "", meshapi.QueryState)
		return err == nil && v.Get(&budget) == nil && len(budget.Leases) == 0
	}, time.Minute, 50*time.Millisecond, "the ghost's lease is dropped")

	s.converge("alpha", s.commit("alpha"))
}
