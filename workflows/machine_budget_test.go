package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// A request that carries a fleet budget is pushed only once the budget
// grants the machine a lease: meanwhile the machine's state says why it
// waits, in the budget's words; the lease is given back when the push
// ends. A request without one asks nothing.
func TestMachinePushesOnlyWithALeaseOfTheFleetBudget(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		var asks []meshapi.LeaseAsk
		var releases []meshapi.LeaseRelease
		h.env.OnActivity(acts.AskLease, mock.Anything, mock.Anything).Return(func(_ context.Context, a meshapi.LeaseAsk) error {
			asks = append(asks, a)
			return nil
		})
		recordSignals(h.env, &h.mu, meshapi.SignalLeaseRelease, &releases)
		var pushedAt []time.Duration
		start := h.env.Now()
		h.push = func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
			pushedAt = append(pushedAt, h.env.Now().Sub(start))
			return meshapi.PushOutcome{Outcome: meshapi.MachineConverged, Seq: in.Seq, Sent: true}, nil
		}

		r := req("plan/host/c1", "host", 1)
		r.Budget = &meshapi.FleetBudget{MaxUnavailable: 1, FleetSize: 3}
		h.signalAt(0, r)
		const words = "waiting for the fleet budget: 1 of 1 unavailable (edge-3 pushing web)"
		h.env.RegisterDelayedCallback(func() {
			h.env.SignalWorkflow(meshapi.SignalLeaseGrant, meshapi.LeaseGrant{Request: "someone else's", Granted: true})
			h.env.SignalWorkflow(meshapi.SignalLeaseGrant, meshapi.LeaseGrant{Request: r.Request, Words: words})
		}, time.Second)
		var waiting meshapi.MachineState
		h.env.RegisterDelayedCallback(func() {
			v, err := h.env.QueryWorkflow(meshapi.QueryState)
			require.NoError(t, err)
			require.NoError(t, v.Get(&waiting))
		}, 2*time.Minute)
		h.env.RegisterDelayedCallback(func() {
			h.env.SignalWorkflow(meshapi.SignalLeaseGrant, meshapi.LeaseGrant{Request: r.Request, Granted: true})
		}, 5*time.Minute)
		// A request of the same run without a budget asks nothing.
		plain := req("plan/web/c2", "web", 1)
		h.signalAt(6*time.Minute, plain)
		h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})

		require.Len(t, asks, 1, "one ask, for the request with a budget")
		require.Equal(t, meshapi.LeaseAsk{Machine: "m1", Request: r.Request, Plan: r.Plan, Module: "host", Budget: *r.Budget,
			Hold: leaseHold(meshapi.PushPolicy{}.WithDefaults())}, asks[0])
		require.Equal(t, []time.Duration{5 * time.Minute, 6 * time.Minute}, pushedAt,
			"the budgeted push went when granted, not at another request's grant; the plain one at once")
		require.Equal(t, words, waiting.BudgetWait, "the state says why the push waits")
		require.Equal(t, "fleet-budget/default-test-taskqueue", waiting.BudgetWorkflow, "and which budget to ask for its place now")
		require.NotNil(t, waiting.Current)
		require.Equal(t, r.Request, waiting.Current.Request)
		require.Equal(t, []meshapi.LeaseRelease{{Machine: "m1", Request: r.Request}}, releases, "the lease is given back once, for its push")
	})
}

// A machine the fleet budget leaves unanswered (a budget terminated with
// its ask in line) asks again every reaskEvery, the same ask, until it is
// granted.
func TestMachineAsksTheFleetBudgetAgainWhenUnanswered(t *testing.T) {
	h := newMachineHarness(t)
	var asks []time.Duration
	start := h.env.Now()
	h.env.OnActivity(acts.AskLease, mock.Anything, mock.Anything).Return(func(context.Context, meshapi.LeaseAsk) error {
		asks = append(asks, h.env.Now().Sub(start))
		return nil
	})
	var releases []meshapi.LeaseRelease
	recordSignals(h.env, &h.mu, meshapi.SignalLeaseRelease, &releases)
	r := req("plan/host/c1", "host", 1)
	r.Budget = &meshapi.FleetBudget{MaxUnavailable: 1}
	h.signalAt(0, r)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(meshapi.SignalLeaseGrant, meshapi.LeaseGrant{Request: r.Request, Granted: true})
	}, 2*reaskEvery+time.Minute)
	h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 1})

	require.Equal(t, []time.Duration{0, reaskEvery, 2 * reaskEvery}, asks)
	require.Len(t, h.pushes, 1, "pushed once granted")
	require.Len(t, releases, 1)
}
