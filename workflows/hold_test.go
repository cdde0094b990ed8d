package workflows

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// A freeze on the machine of tier 2 holds the plan after tier 1, shows it
// held in its state and details, sends nothing to tier 2, and a hold-lifted
// signal (the unfreeze) lets it go on; a hold-lifted signal while the freeze
// is still there keeps it held.
func TestPlanFrozenHoldsUntilLifted(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	var frozen atomic.Bool
	frozen.Store(true)
	fz := mesh.Freeze{ID: 1, Machine: "control-node", By: "alice", Reason: "controller upgrade"}
	h.holdsFn = func(in meshapi.HoldsInput) (meshapi.HoldsResult, error) {
		if frozen.Load() && slices.Contains(in.Machines, "control-node") {
			return meshapi.HoldsResult{Frozen: []mesh.Freeze{fz}, Why: "held: " + fz.String()}, nil
		}
		return meshapi.HoldsResult{}, nil
	}
	h.env.RegisterDelayedCallback(func() {
		st := h.query()
		require.Equal(t, meshapi.PlanHeld, st.State)
		require.Equal(t, "held: freeze by alice: controller upgrade", st.Reason)
		require.Equal(t, meshapi.TierConverged, st.Tiers[0].State)
		require.Equal(t, meshapi.TierWaiting, st.Tiers[1].State)
		require.Equal(t, [][]string{{"edge-1"}}, h.enqueued, "nothing handed to tier 2 while frozen")
		// A plan told of another scope's unfreeze checks again and stays held.
		h.env.SignalWorkflow(meshapi.SignalHoldLifted, meshapi.HoldLifted{By: "bob", Scope: "module metrics"})
	}, time.Hour)
	h.env.RegisterDelayedCallback(func() {
		st := h.query()
		require.Equal(t, meshapi.PlanHeld, st.State, "the freeze is still there")
		frozen.Store(false)
		h.env.SignalWorkflow(meshapi.SignalHoldLifted, meshapi.HoldLifted{By: "alice", Scope: "machine control-node"})
	}, 2*time.Hour)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Equal(t, [][]string{{"edge-1"}, {"control-node"}}, h.enqueued)
	// Checked before each batch: once for tier 1, then tier 2 at first, on
	// the signal that did not lift it, and on the one that did.
	require.Len(t, h.holds, 4)
}

// Outside a deployment window the plan holds on a durable timer until the
// window opens, then goes on by itself: no signal, no polling.
func TestPlanOutsideWindowWaitsForTimer(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"))...)
	start := h.env.Now()
	opens := start.Add(3 * time.Hour)
	h.holdsFn = func(meshapi.HoldsInput) (meshapi.HoldsResult, error) {
		if h.env.Now().Before(opens) {
			o := opens.UTC()
			return meshapi.HoldsResult{WindowOpensAt: &o, Why: "held: outside window, opens at " + o.Format(time.RFC3339)}, nil
		}
		return meshapi.HoldsResult{}, nil
	}
	h.env.RegisterDelayedCallback(func() {
		st := h.query()
		require.Equal(t, meshapi.PlanHeld, st.State)
		require.Contains(t, st.Reason, "held: outside window, opens at ")
		require.Empty(t, h.enqueued)
	}, time.Hour)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Len(t, h.holds, 2, "checked once, then once when the timer fired")
	require.False(t, h.env.Now().Before(opens), "went on at %v, before the window opened at %v", h.env.Now(), opens)
}

// An abort ends a held plan at once.
func TestPlanHeldAborts(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"))...)
	h.holdsFn = func(meshapi.HoldsInput) (meshapi.HoldsResult, error) {
		return meshapi.HoldsResult{Why: "held: freeze by alice: release week"}, nil
	}
	var abort *updateResult
	h.env.RegisterDelayedCallback(func() {
		abort = h.update(meshapi.UpdateAbort, meshapi.AbortInput{By: "bob", Reason: "not this week"})
	}, time.Hour)
	st := h.run(meshapi.PlanInput{})
	abort.ok(t)
	require.Equal(t, meshapi.PlanAborted, st.State, st.Reason)
	require.Empty(t, h.enqueued)
}

// A rollback asks the check as a rollback, and an override's words travel
// in every push request for the hosts to journal.
func TestPlanHoldsInputAndOverrideWords(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1", "edge-2"))...)
	st := h.run(meshapi.PlanInput{OverrideFreeze: &meshapi.Override{By: "alice", Reason: "hotfix for incident 42"}})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Len(t, h.holds, 1)
	require.True(t, h.holds[0].OverrideFreeze)
	require.False(t, h.holds[0].Rollback)
	require.Equal(t, "host", h.holds[0].Module)
	require.ElementsMatch(t, []string{"edge-1", "edge-2"}, h.holds[0].Machines)
	require.Equal(t, []string{"override freeze by alice: hotfix for incident 42", "override freeze by alice: hotfix for incident 42"}, h.notes)

	bad := newPlanHarness(t, targets(tier(1, "edge-1"))...)
	st = bad.run(meshapi.PlanInput{OverrideFreeze: &meshapi.Override{By: "alice"}})
	require.Equal(t, meshapi.PlanRefused, st.State)
	require.Contains(t, st.Reason, "needs reason")
}
