package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// notifyingHarness is a plan harness whose worker has notify targets: it
// records every event the plan hands over, in order.
func notifyingHarness(t *testing.T, ts ...meshapi.Target) (*planHarness, *[]meshapi.NotifyEvent) {
	h := newPlanHarness(t, ts...)
	return h, notifying(h)
}

// notifying gives the harness's worker notify targets and records every
// event the plan hands over, in order.
func notifying(h *planHarness) *[]meshapi.NotifyEvent {
	targets := h.targetsFn
	h.targetsFn = func() (meshapi.TargetsResult, error) {
		tr, err := targets()
		tr.Notify = true
		return tr, err
	}
	var mu sync.Mutex
	events := &[]meshapi.NotifyEvent{}
	h.env.OnActivity(acts.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in meshapi.NotifyInput) (meshapi.NotifyResult, error) {
			mu.Lock()
			defer mu.Unlock()
			*events = append(*events, in.Event)
			return meshapi.NotifyResult{Targets: []string{"team"}}, nil
		})
	return events
}

func eventNames(events []meshapi.NotifyEvent) []string {
	var out []string
	for i, e := range events {
		if e.Sequence != i+1 {
			return append(out, "out of sequence: "+e.Key())
		}
		out = append(out, e.Event)
	}
	return out
}

// A plan announces each of its states once, where it changes, each event
// numbered in order, in the plan's words, with the command that moves it
// on where one does.
func TestPlanAnnouncesItsEvents(t *testing.T) {
	two := targets(tier(1, "edge-1"), tier(2, "control-node"))
	for _, tc := range []struct {
		name  string
		in    meshapi.PlanInput
		setup func(h *planHarness)
		end   meshapi.PlanStatus
		want  []string
	}{
		{
			name: "gated, approved, converged",
			in:   meshapi.PlanInput{Gates: []int{2}},
			setup: func(h *planHarness) {
				h.env.RegisterDelayedCallback(func() { h.update(meshapi.UpdateApprove, meshapi.ApproveInput{By: "alice"}) }, time.Hour)
			},
			end:  meshapi.PlanConverged,
			want: []string{meshapi.EventPlanStarted, meshapi.EventPlanGated, meshapi.EventPlanConverged},
		},
		{
			name: "two gates are two events",
			in:   meshapi.PlanInput{Gates: []int{1, 2}},
			setup: func(h *planHarness) {
				one, two := 1, 2
				h.env.RegisterDelayedCallback(func() { h.update(meshapi.UpdateApprove, meshapi.ApproveInput{Tier: &one}) }, time.Hour)
				h.env.RegisterDelayedCallback(func() { h.update(meshapi.UpdateApprove, meshapi.ApproveInput{Tier: &two}) }, 2*time.Hour)
			},
			end:  meshapi.PlanConverged,
			want: []string{meshapi.EventPlanStarted, meshapi.EventPlanGated, meshapi.EventPlanGated, meshapi.EventPlanConverged},
		},
		{
			name: "a rollback converges: rolled back",
			in:   meshapi.PlanInput{Rollback: &meshapi.Rollback{By: "alice", Reason: "errors up"}},
			setup: func(h *planHarness) {
				h.env.OnActivity(acts.RollbackTarget, mock.Anything, mock.Anything).Return(
					func(_ context.Context, in meshapi.RollbackTargetInput) (meshapi.RollbackTargetResult, error) {
						return meshapi.RollbackTargetResult{Build: prevBuild, Machines: in.Machines}, nil
					})
			},
			end:  meshapi.PlanConverged,
			want: []string{meshapi.EventPlanStarted, meshapi.EventPlanRolledBack},
		},
		{
			name: "a machine refuses: refused",
			setup: func(h *planHarness) {
				h.outcome = func(string) *meshapi.PushResult {
					return &meshapi.PushResult{Outcome: meshapi.MachineRefused, Reason: "digest the catalogue does not know"}
				}
			},
			end:  meshapi.PlanRefused,
			want: []string{meshapi.EventPlanStarted, meshapi.EventPlanRefused},
		},
		{
			name:  "build fails: halted",
			setup: func(h *planHarness) { h.failBuild("compile error") },
			end:   meshapi.PlanHalted,
			want:  []string{meshapi.EventPlanStarted, meshapi.EventPlanHalted},
		},
		{
			name: "aborted at its gate",
			in:   meshapi.PlanInput{Gates: []int{2}},
			setup: func(h *planHarness) {
				h.env.RegisterDelayedCallback(func() { h.update(meshapi.UpdateAbort, meshapi.AbortInput{By: "alice", Reason: "wrong commit"}) }, time.Hour)
			},
			end:  meshapi.PlanAborted,
			want: []string{meshapi.EventPlanStarted, meshapi.EventPlanGated, meshapi.EventPlanAborted},
		},
		{
			name: "held by a freeze, once however often it checks",
			setup: func(h *planHarness) {
				var frozen atomic.Bool
				frozen.Store(true)
				h.holdsFn = func(in meshapi.HoldsInput) (meshapi.HoldsResult, error) {
					if frozen.Load() && slices.Contains(in.Machines, "control-node") {
						return meshapi.HoldsResult{Why: "held: freeze by alice: upgrade"}, nil
					}
					return meshapi.HoldsResult{}, nil
				}
				h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(meshapi.SignalHoldLifted, meshapi.HoldLifted{By: "bob"}) }, time.Hour)
				h.env.RegisterDelayedCallback(func() {
					frozen.Store(false)
					h.env.SignalWorkflow(meshapi.SignalHoldLifted, meshapi.HoldLifted{By: "alice"})
				}, 2*time.Hour)
			},
			end:  meshapi.PlanConverged,
			want: []string{meshapi.EventPlanStarted, meshapi.EventPlanHeld, meshapi.EventPlanConverged},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, events := notifyingHarness(t, two...)
			if tc.setup != nil {
				tc.setup(h)
			}
			st := h.run(tc.in)
			require.Equal(t, tc.end, st.State, st.Reason)
			require.Equal(t, tc.want, eventNames(*events))
			last := (*events)[len(*events)-1]
			require.Equal(t, st.Reason, last.Reason, "the ending in the plan's words")
			require.Equal(t, st.Plan+"#1-plan_started", (*events)[0].Key())
			require.Equal(t, st.Commit, last.Commit, "the commit the plan pushed (a rollback's is the one it went back to)")
			for _, e := range *events {
				require.Equal(t, "host", e.Module)
				if e.Event == meshapi.EventPlanGated {
					require.True(t, strings.HasPrefix(e.Command, "starter plan approve "+st.Plan+" --tier "), e.Command)
					require.Contains(t, e.Reason, "waiting for approval")
				}
			}
		})
	}
}

// A plan the worker's mesh config cannot give targets (a module it does
// not know, or none of its machines runs) is refused before it starts,
// and its targets still hear why.
func TestPlanRefusedBeforeItStartsIsAnnounced(t *testing.T) {
	for _, tc := range []struct {
		name    string
		targets meshapi.TargetsResult
		want    string
	}{
		{"unknown module", meshapi.TargetsResult{Refused: `unknown module "host" in the worker's mesh config`}, `unknown module "host"`},
		{"no machine runs it", meshapi.TargetsResult{}, "no machine runs module host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, events := notifyingHarness(t)
			h.targetsFn = func() (meshapi.TargetsResult, error) {
				tr := tc.targets
				tr.Notify = true
				return tr, nil
			}
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanRefused, st.State, st.Reason)
			require.Contains(t, st.Reason, tc.want)
			require.Equal(t, []string{meshapi.EventPlanRefused}, eventNames(*events))
			require.Equal(t, st.Reason, (*events)[0].Reason)
		})
	}
}

// An inconclusive analysis is its own event, with the approve command
// that passes it.
func TestPlanAnnouncesAnInconclusiveAnalysis(t *testing.T) {
	inconclusive := check("error-rate", meshapi.AnalysisInconclusive, false)
	h := newAnalysisHarness(t, []string{"error-rate"}, 0, map[string]meshapi.AnalysisCheck{"error-rate": inconclusive}, nil)
	events := notifying(h.planHarness)
	h.env.RegisterDelayedCallback(func() { h.update(meshapi.UpdateApprove, meshapi.ApproveInput{By: "alice"}) }, time.Hour)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Equal(t, []string{meshapi.EventPlanStarted, meshapi.EventAnalysisInconclusive, meshapi.EventPlanConverged}, eventNames(*events))
	require.Equal(t, "starter plan approve "+st.Plan, (*events)[1].Command)
	require.Contains(t, (*events)[1].Reason, "analysis is inconclusive")
}

// A Notifier delivers its events in the order it was given them, each
// until the target takes it, waiting longer after each failure, and shows
// a failing target in its details meanwhile; a target gone from the
// config is given up on at once.
func TestNotifierTriesUntilDelivered(t *testing.T) {
	env := quietSuite().NewTestWorkflowEnvironment()
	env.RegisterWorkflow(Notifier)
	var tries []meshapi.DeliverInput
	env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(func(_ context.Context, in meshapi.DeliverInput) error {
		tries = append(tries, in)
		switch {
		case in.Event.Event == meshapi.EventPlanHalted:
			return temporal.NewNonRetryableApplicationError("notify target team is no longer in the worker's config", "NotifyTargetGone", nil)
		case len(tries) <= 3:
			return errors.New("receiver answered 503 Service Unavailable")
		}
		return nil
	})
	told := recordTrouble(env)
	ev := func(seq int, name string) meshapi.NotifyEvent {
		return meshapi.NotifyEvent{Event: name, Sequence: seq, Plan: "plan/host/c0ffee", Module: "host"}
	}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(meshapi.SignalNotify, ev(1, meshapi.EventPlanStarted))
		env.SignalWorkflow(meshapi.SignalNotify, ev(2, meshapi.EventPlanGated))
		env.SignalWorkflow(meshapi.SignalNotify, ev(3, meshapi.EventPlanHalted))
	}, 0)
	var details string
	env.RegisterDelayedCallback(func() {
		details = currentDetails(t, env)
	}, 5*time.Second) // after the third failed try (at 0 s, 1 s and 3 s), before the fourth (7 s)
	env.ExecuteWorkflow(Notifier, meshapi.NotifierInput{Target: "team", Plan: "plan/host/c0ffee"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	var keys []string
	for _, d := range tries {
		keys = append(keys, d.Event.Key())
	}
	started, gated, halted := ev(1, meshapi.EventPlanStarted).Key(), ev(2, meshapi.EventPlanGated).Key(), ev(3, meshapi.EventPlanHalted).Key()
	require.Equal(t, []string{started, started, started, started, gated, halted}, keys, "in order, each until taken, a gone target once")
	require.Equal(t, 4, tries[3].Attempt)
	require.Contains(t, details, "target team is failing: 3 tries of "+started+", the last: receiver answered 503 Service Unavailable; next try in 4s")
	require.Equal(t, []string{started + " failing", started + " recovered", halted + " abandoned"}, *told,
		"the plan is told of a first failure, a recovery and an abandonment, never of each try")
}

// recordTrouble records what the Notifier tells its plan, as "event
// outcome".
func recordTrouble(env *testsuite.TestWorkflowEnvironment) *[]string {
	told := &[]string{}
	env.OnSignalExternalWorkflow(mock.Anything, "plan/host/c0ffee", "", meshapi.SignalNotifyTrouble, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			tr := arg.(meshapi.NotifyTrouble)
			*told = append(*told, tr.Event+" "+tr.Outcome)
			return nil
		})
	return told
}

// TestNotifierRetriesAsTheTargetSays: a target's retry_first, retry_max and
// give_up_after set the Notifier's waits and when it gives up.
func TestNotifierRetriesAsTheTargetSays(t *testing.T) {
	env := quietSuite().NewTestWorkflowEnvironment()
	env.RegisterWorkflow(Notifier)
	var at []time.Duration
	var start time.Time
	env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(func(context.Context, meshapi.DeliverInput) error {
		now := env.Now()
		if start.IsZero() {
			start = now
		}
		at = append(at, now.Sub(start))
		return errors.New("receiver answered 503 Service Unavailable")
	})
	told := recordTrouble(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(meshapi.SignalNotify, meshapi.NotifyEvent{Event: meshapi.EventPlanStarted, Sequence: 1, Plan: "plan/host/c0ffee", Module: "host"})
	}, 0)
	env.ExecuteWorkflow(Notifier, meshapi.NotifierInput{Target: "team", Plan: "plan/host/c0ffee",
		Retry: meshapi.NotifyRetry{First: 2 * time.Second, Max: 3 * time.Second, GiveUp: 10 * time.Second}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []time.Duration{0, 2 * time.Second, 5 * time.Second, 8 * time.Second, 11 * time.Second}, at,
		"2 s, then doubling to at most 3 s, until 10 s have passed")
	key := "plan/host/c0ffee#1-plan_started"
	require.Equal(t, []string{key + " failing", key + " abandoned"}, *told)
}

// TestPlanShowsItsNotifyTroubles: what a Notifier tells its plan is in the
// plan's state, one per target, until the target recovers.
func TestPlanShowsItsNotifyTroubles(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	since := time.Date(2026, 12, 5, 10, 4, 5, 0, time.UTC)
	trouble := func(target, outcome string) meshapi.NotifyTrouble {
		return meshapi.NotifyTrouble{Target: target, Event: "plan/host/c#1-plan_started", Outcome: outcome, Since: since, Error: "503"}
	}
	var failing, recovered []meshapi.NotifyTrouble
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(meshapi.SignalNotifyTrouble, trouble("team", meshapi.NotifyFailing))
		h.env.SignalWorkflow(meshapi.SignalNotifyTrouble, trouble("chat", meshapi.NotifyAbandoned))
	}, 10*time.Minute)
	h.env.RegisterDelayedCallback(func() { failing = h.query().NotifyTrouble }, 20*time.Minute)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(meshapi.SignalNotifyTrouble, trouble("team", meshapi.NotifyRecovered))
	}, 30*time.Minute)
	h.env.RegisterDelayedCallback(func() { recovered = h.query().NotifyTrouble }, 40*time.Minute)
	h.env.RegisterDelayedCallback(func() { h.update(meshapi.UpdateApprove, meshapi.ApproveInput{By: "alice"}) }, time.Hour)
	st := h.run(meshapi.PlanInput{Gates: []int{2}})
	require.Equal(t, meshapi.PlanConverged, st.State)
	require.Equal(t, []meshapi.NotifyTrouble{trouble("chat", meshapi.NotifyAbandoned), trouble("team", meshapi.NotifyFailing)}, failing)
	require.Equal(t, []meshapi.NotifyTrouble{trouble("chat", meshapi.NotifyAbandoned)}, recovered)
	require.Equal(t, "notify target chat abandoned since 10:04:05 UTC (plan/host/c#1-plan_started): 503", recovered[0].Words())
}
