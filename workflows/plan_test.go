package workflows

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/activities"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

const commit = "1111111111111111111111111111111111111111"

// planHarness runs the plan workflow with faked activities; the fake
// HandPushes answers each request as a machine workflow would, by
// signalling the plan.
type planHarness struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	targets []meshapi.Target

	mu       sync.Mutex
	enqueued [][]string // machines per HandPushes call, in call order
	// composeBatches is the size of each ComposeTargets call.
	composeBatches []int
	// outcome answers a machine's push; nil means no answer (still in
	// flight). Default: converged.
	outcome   func(machine string) *meshapi.PushResult
	cancelled []meshapi.CancelPush

	targetsFn func() (meshapi.TargetsResult, error)
	buildFn   func() (mesh.Build, error)
	// buildsComposing counts the builds that composed too (BuildAndCompose).
	buildsComposing int
	composeFn       func(composeCall) (meshapi.ComposeResult, error)
	// holdsFn answers the hold check before each batch; default: no hold.
	holdsFn func(meshapi.HoldsInput) (meshapi.HoldsResult, error)
	holds   []meshapi.HoldsInput
	notes   []string // PushRequest.Note of every request handed
	// requests are every request handed, in order.
	requests []meshapi.PushRequest
	// together, when set, holds a tier's answers until every machine of the
	// tier has been handed its request, then buffers them all, so that the
	// plan takes them in one workflow task, as a plan does when a tier's
	// answers arrive faster than it runs tasks. Relayed answers are
	// buffered as bundles, straight to the plan; a together test mocks
	// its relays to end at once (TestRelayPassesAnswersOnInBundles tests
	// them).
	together bool
	held     []meshapi.PushResult
	// handedLocally and handedByActivity count HandPushes calls by kind.
	handedLocally, handedByActivity int
}

// composeCall is one target of a ComposeTargets call.
type composeCall struct {
	Plan   string
	Target meshapi.Target
	Build  mesh.Build
}

// failBuild makes the build fail for good with msg, as a compile error
// does.
func (h *planHarness) failBuild(msg string) {
	h.buildFn = func() (mesh.Build, error) {
		return mesh.Build{}, temporal.NewNonRetryableApplicationError(msg, meshapi.ErrBuildFailed, nil)
	}
}

func newPlanHarness(t *testing.T, targets ...meshapi.Target) *planHarness {
	h := &planHarness{t: t, env: quietSuite().NewTestWorkflowEnvironment(), targets: targets}
	h.env.RegisterWorkflowWithOptions(Plan, workflow.RegisterOptions{Name: meshapi.PlanWorkflowType})
	h.env.RegisterWorkflowWithOptions(Relay, workflow.RegisterOptions{Name: meshapi.RelayWorkflowType})
	h.env.RegisterActivity(&activities.Activities{})
	h.targetsFn = func() (meshapi.TargetsResult, error) { return meshapi.TargetsResult{Targets: targets}, nil }
	h.buildFn = func() (mesh.Build, error) {
		return mesh.Build{Module: "host", Commit: commit, Digest: "sha256:" + strings.Repeat("a", 64), Generation: 7}, nil
	}
	h.composeFn = func(in composeCall) (meshapi.ComposeResult, error) {
		return meshapi.ComposeResult{Declaration: mesh.Declaration{Machine: in.Target.Machine, Plan: in.Plan,
			Containers: []mesh.Container{{Module: in.Build.Module, Digest: in.Build.Digest, Generation: in.Build.Generation}}}}, nil
	}
	h.env.OnActivity(acts.Targets, mock.Anything, mock.Anything).Return(
		func(context.Context, meshapi.TargetsInput) (meshapi.TargetsResult, error) { return h.targetsFn() })
	h.env.OnActivity(acts.Build, mock.Anything, mock.Anything).Return(
		func(context.Context, meshapi.BuildInput) (mesh.Build, error) { return h.buildFn() })
	// ComposeTargets composes as the real one does: composeFn per target, a
	// permanent failure named in its result.
	composeTargets := func(in meshapi.ComposeTargetsInput) (meshapi.ComposeTargetsResult, error) {
		h.mu.Lock()
		h.composeBatches = append(h.composeBatches, len(in.Targets))
		h.mu.Unlock()
		var out meshapi.ComposeTargetsResult
		for _, t := range in.Targets {
			res, err := h.composeFn(composeCall{Plan: in.Plan, Target: t, Build: in.Build})
			var appErr *temporal.ApplicationError
			switch {
			case err == nil:
				out.Results = append(out.Results, meshapi.ComposedTarget{ComposeResult: res})
			case errors.As(err, &appErr) && appErr.NonRetryable():
				out.Results = append(out.Results, meshapi.ComposedTarget{Error: appErr.Message()})
			default:
				return meshapi.ComposeTargetsResult{}, err
			}
		}
		return out, nil
	}
	h.env.OnActivity(acts.ComposeTargets, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in meshapi.ComposeTargetsInput) (meshapi.ComposeTargetsResult, error) {
			return composeTargets(in)
		})
	// BuildAndCompose is Build, then ComposeTargets, as the real one.
	h.env.OnActivity(acts.BuildAndCompose, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in meshapi.BuildComposeInput) (meshapi.BuildComposeResult, error) {
			h.mu.Lock()
			h.buildsComposing++
			h.mu.Unlock()
			b, err := h.buildFn()
			if err != nil {
				return meshapi.BuildComposeResult{}, err
			}
			res, err := composeTargets(meshapi.ComposeTargetsInput{Plan: in.Build.Plan, Targets: in.Targets, Build: b})
			if err != nil {
				return meshapi.BuildComposeResult{Build: b, ComposeError: err.Error()}, nil
			}
			return meshapi.BuildComposeResult{Build: b, Composed: &res}, nil
		})
	h.holdsFn = func(meshapi.HoldsInput) (meshapi.HoldsResult, error) { return meshapi.HoldsResult{}, nil }
	h.env.OnActivity(acts.Holds, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in meshapi.HoldsInput) (meshapi.HoldsResult, error) {
			h.mu.Lock()
			h.holds = append(h.holds, in)
			h.mu.Unlock()
			return h.holdsFn(in)
		})
	h.env.OnActivity(acts.HandPushes, mock.Anything, mock.Anything).Return(func(_ context.Context, in meshapi.HandPushesInput) (meshapi.HandPushesResult, error) {
		var ms []string
		for _, r := range in.Requests {
			ms = append(ms, r.Machine)
			h.mu.Lock()
			h.notes = append(h.notes, r.Note)
			h.requests = append(h.requests, r)
			h.mu.Unlock()
			res := &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 1}
			if h.outcome != nil {
				res = h.outcome(r.Machine)
			}
			if res != nil {
				res.Request, res.Plan, res.ReplyTo, res.Machine = r.Request, r.Plan, r.ReplyTo, r.Machine
				if h.together {
					h.mu.Lock()
					h.held = append(h.held, *res)
					h.mu.Unlock()
				} else {
					h.answer(*res)
				}
			}
		}
		h.releaseTier(in.Requests)
		h.mu.Lock()
		h.enqueued = append(h.enqueued, ms)
		h.mu.Unlock()
		return meshapi.HandPushesResult{Enqueued: len(in.Requests)}, nil
	})
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "HandPushes" {
			h.handedByActivity++
		}
	})
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == "HandPushes" {
			h.handedLocally++
		}
	})
	recordSignals(h.env, &h.mu, meshapi.SignalCancelPush, &h.cancelled)
	return h
}

// answer signals a machine's answer where a machine workflow would: the
// request's relay, or else its plan.
func (h *planHarness) answer(res meshapi.PushResult) {
	if res.ReplyTo == "" {
		h.env.SignalWorkflow(meshapi.SignalPushResult, res)
		return
	}
	// A relay that has ended takes nothing: the machine workflow logs it.
	_ = h.env.SignalWorkflowByID(res.ReplyTo, meshapi.SignalPushResult, res)
}

// handed is every machine handed a request, in hand-over order.
func (h *planHarness) handed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all []string
	for _, e := range h.enqueued {
		all = append(all, e...)
	}
	return all
}

// releaseTier, in together mode, buffers every held answer once each
// machine of the requests' tier has been handed its request.
func (h *planHarness) releaseTier(reqs []meshapi.PushRequest) {
	if !h.together || len(reqs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tier, n := 0, 0
	for _, t := range h.targets {
		if t.Machine == reqs[0].Machine {
			tier = t.Tier
		}
	}
	for _, t := range h.targets {
		if t.Tier == tier {
			n++
		}
	}
	if len(h.held) < n {
		return
	}
	var bundle []meshapi.PushResult
	for _, res := range h.held {
		if res.ReplyTo == "" {
			h.env.SignalWorkflowSkippingWorkflowTask(meshapi.SignalPushResult, res)
			continue
		}
		// Relayed answers reach the plan in bundles, as their relays
		// would pass them on (the relays end at once: see together).
		if bundle = append(bundle, res); len(bundle) == meshapi.RelayBundle {
			h.env.SignalWorkflowSkippingWorkflowTask(meshapi.SignalPushResults, meshapi.PushResults{Results: bundle})
			bundle = nil
		}
	}
	if len(bundle) > 0 {
		h.env.SignalWorkflowSkippingWorkflowTask(meshapi.SignalPushResults, meshapi.PushResults{Results: bundle})
	}
	h.held = nil
}

func (h *planHarness) run(in meshapi.PlanInput) meshapi.PlanState {
	h.t.Helper()
	if in.Module == "" {
		in.Module, in.Commit = "host", commit
	}
	h.env.ExecuteWorkflow(Plan, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	var st meshapi.PlanState
	err := h.env.GetWorkflowResult(&st)
	require.NoError(h.t, meshapi.PlanOutcome(err, &st))
	// A plan that fails ends as a failed workflow, and only then.
	assert.Equal(h.t, st.State.Fails(), err != nil, "workflow error %v for a plan that ended %s", err, st.State)
	return st
}

func (h *planHarness) query() meshapi.PlanState {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(meshapi.QueryState)
	require.NoError(h.t, err)
	var st meshapi.PlanState
	require.NoError(h.t, v.Get(&st))
	return st
}

// updateResult is an update's answer, filled in when the environment
// delivers it.
type updateResult struct {
	done bool
	err  error
}

// update sends an update; its answer arrives after the callback returns.
func (h *planHarness) update(name string, arg any) *updateResult {
	r := &updateResult{}
	h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnAccept:   func() {},
		OnReject:   func(err error) { r.done, r.err = true, err },
		OnComplete: func(_ interface{}, err error) { r.done, r.err = true, err },
	}, arg)
	return r
}

// ok asserts the update was answered without error.
func (r *updateResult) ok(t *testing.T) {
	t.Helper()
	require.True(t, r.done, "update answered")
	require.NoError(t, r.err)
}

// rejected asserts the update was refused with the given error type.
func (r *updateResult) rejected(t *testing.T, typ string) {
	t.Helper()
	require.True(t, r.done, "update answered")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, r.err, &appErr)
	require.Equal(t, typ, appErr.Type())
}

func tier(n int, machines ...string) []meshapi.Target {
	var ts []meshapi.Target
	for _, m := range machines {
		ts = append(ts, meshapi.Target{Machine: m, Tier: n, Modules: []string{"host"}})
	}
	return ts
}

func targets(groups ...[]meshapi.Target) []meshapi.Target {
	var ts []meshapi.Target
	for _, g := range groups {
		ts = append(ts, g...)
	}
	return ts
}

func machineState(st meshapi.PlanState, machine string) meshapi.MachineProgress {
	m, _ := st.Machine(machine)
	return m
}

func TestPlanPushesTiersInOrder(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1", "edge-2"), tier(2, "control-node"))...)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Equal(t, [][]string{{"edge-1", "edge-2"}, {"control-node"}}, h.enqueued, "tier 1 in one wave, then tier 2")
	for _, tr := range st.Tiers {
		require.Equal(t, meshapi.TierConverged, tr.State)
	}
	require.Equal(t, int64(7), st.Build.Generation)
}

func TestPlanFailedTierHaltsLaterTiers(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1", "edge-2"), tier(2, "control-node"))...)
	h.outcome = func(m string) *meshapi.PushResult {
		if m == "edge-2" {
			return &meshapi.PushResult{Outcome: meshapi.MachineFailed, Reason: "host unreachable for 2m0s"}
		}
		return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 1}
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, "edge-2")
	require.Contains(t, st.Reason, "unreachable")
	require.Equal(t, [][]string{{"edge-1", "edge-2"}}, h.enqueued, "tier 2 is never pushed")
	require.Equal(t, meshapi.TierHalted, st.Tiers[0].State)
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State)
	require.Equal(t, meshapi.MachineSkipped, machineState(st, "control-node").State, "a machine the plan never pushed reads skipped, not waiting")
}

func TestPlanRefusedMachineEndsRefused(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	h.outcome = func(string) *meshapi.PushResult {
		return &meshapi.PushResult{Outcome: meshapi.MachineRefused, Reason: "digest the catalogue does not know"}
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanRefused, st.State)
	require.Contains(t, st.Reason, "edge-1: digest the catalogue does not know")
	require.Len(t, h.enqueued, 1)
}

func TestPlanGateWaitsForApproval(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	var approve *updateResult
	h.env.RegisterDelayedCallback(func() {
		st := h.query()
		require.Equal(t, meshapi.PlanGated, st.State)
		require.Equal(t, meshapi.TierConverged, st.Tiers[0].State)
		require.Equal(t, meshapi.TierGated, st.Tiers[1].State)
		require.Len(t, h.enqueued, 1, "tier 2 not pushed before approval")
		approve = h.update(meshapi.UpdateApprove, meshapi.ApproveInput{By: "alice"})
	}, time.Hour)
	st := h.run(meshapi.PlanInput{Gates: []int{2}})
	approve.ok(t)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Len(t, h.enqueued, 2)
}

func TestPlanApproveValidation(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	var noSuchGate, ahead *updateResult
	three, two := 3, 2
	h.env.RegisterDelayedCallback(func() {
		noSuchGate = h.update(meshapi.UpdateApprove, meshapi.ApproveInput{Tier: &three})
		ahead = h.update(meshapi.UpdateApprove, meshapi.ApproveInput{Tier: &two})
	}, 0)
	st := h.run(meshapi.PlanInput{Gates: []int{2}})
	require.Equal(t, meshapi.PlanConverged, st.State, "a gate approved ahead lets the plan through: %s", st.Reason)
	noSuchGate.rejected(t, meshapi.ErrNotGated)
	ahead.ok(t)

	h2 := newPlanHarness(t, tier(1, "edge-1")...)
	h2.outcome = func(string) *meshapi.PushResult { return nil } // stays pushing
	var notGated, abort *updateResult
	h2.env.RegisterDelayedCallback(func() {
		notGated = h2.update(meshapi.UpdateApprove, meshapi.ApproveInput{})
		abort = h2.update(meshapi.UpdateAbort, meshapi.AbortInput{Reason: "test"})
	}, time.Hour)
	h2.run(meshapi.PlanInput{})
	notGated.rejected(t, meshapi.ErrNotGated)
	abort.ok(t)
}

func TestPlanAbortAtGate(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	var abort *updateResult
	h.env.RegisterDelayedCallback(func() {
		abort = h.update(meshapi.UpdateAbort, meshapi.AbortInput{By: "bob", Reason: "bad build"})
	}, time.Hour)
	st := h.run(meshapi.PlanInput{Gates: []int{2}})
	abort.ok(t)
	require.Equal(t, meshapi.PlanAborted, st.State)
	require.Contains(t, st.Reason, "bob")
	require.Contains(t, st.Reason, "bad build")
	require.Len(t, h.enqueued, 1)
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State)
}

func TestPlanAbortWithdrawsQueuedPushes(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1", "edge-2"), tier(2, "control-node"))...)
	h.outcome = func(m string) *meshapi.PushResult {
		if m == "edge-1" {
			return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 3}
		}
		return nil // edge-2 waits in its machine's queue
	}
	var abort *updateResult
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, meshapi.MachinePushing, machineState(h.query(), "edge-2").State)
		abort = h.update(meshapi.UpdateAbort, meshapi.AbortInput{Reason: "stop"})
	}, time.Hour)
	st := h.run(meshapi.PlanInput{})
	abort.ok(t)
	require.Equal(t, meshapi.PlanAborted, st.State)
	require.Equal(t, []meshapi.CancelPush{{Request: meshapi.RequestID(st.Plan, "edge-2"), Reason: "aborted: stop"}}, h.cancelled)
	require.Equal(t, meshapi.MachineConverged, machineState(st, "edge-1").State)
	require.Equal(t, meshapi.MachineCancelled, machineState(st, "edge-2").State)
	require.Equal(t, []string{"edge-1", "edge-2"}, h.enqueued[0])
	for _, again := range h.enqueued[1:] {
		require.Equal(t, []string{"edge-2"}, again, "only the unanswered machine is handed again, and tier 2 never")
	}
}

// A machine handed again says so in the plan's state until its answer
// comes, and each quiet hand-over waits twice as long as the one before.
func TestPlanSaysAPushWasHandedAgain(t *testing.T) {
	h := newPlanHarness(t, tier(1, "edge-1")...)
	h.outcome = func(string) *meshapi.PushResult { return nil }
	var reasons []string
	for _, at := range []time.Duration{9 * time.Minute, 11 * time.Minute, 29 * time.Minute, 31 * time.Minute} {
		h.env.RegisterDelayedCallback(func() {
			reasons = append(reasons, machineState(h.query(), "edge-1").Reason)
			if at == 31*time.Minute {
				r := h.requests[0]
				h.answer(meshapi.PushResult{Request: r.Request, Plan: r.Plan, Machine: r.Machine, Outcome: meshapi.MachineConverged, Seq: 1})
			}
		}, at)
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Equal(t, [][]string{{"edge-1"}, {"edge-1"}, {"edge-1"}}, h.enqueued, "handed at 0, 10 and 30 minutes")
	require.Equal(t, []string{"", "no answer in 10m0s: handed to its machine workflow again",
		"no answer in 10m0s: handed to its machine workflow again", "no answer in 30m0s: handed to its machine workflow again"}, reasons)
	require.Empty(t, machineState(st, "edge-1").Reason, "its answer says what happened")
}

// A tier that hears nothing for push.rehand_after hands its unanswered
// pushes again, so a machine workflow terminated with a plan's request
// (its successor never heard of it) does not leave the plan waiting for
// ever; a tier still hearing answers waits on.
func TestPlanHandsUnansweredPushesAgain(t *testing.T) {
	converged := func(seq uint64) *meshapi.PushResult {
		return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: seq}
	}
	cases := []struct {
		name       string
		relayAbove int
		// lateAnswers answers edge-2 (handed and lost at first) at these
		// times from the start, as a slow machine would, instead of on its
		// hand-over again.
		lateAnswers []time.Duration
		enqueued    [][]string
	}{
		{name: "lost with its machine workflow, handed again", enqueued: [][]string{{"edge-1", "edge-2"}, {"edge-2"}}},
		{name: "relayed: handed again to the same relay", relayAbove: 1, enqueued: [][]string{{"edge-1", "edge-2"}, {"edge-2"}}},
		{name: "a tier still hearing answers is not handed again", lateAnswers: []time.Duration{5 * time.Minute, 14 * time.Minute},
			enqueued: [][]string{{"edge-1", "edge-2", "edge-3"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			machines := []string{"edge-1", "edge-2"}
			if c.lateAnswers != nil {
				machines = append(machines, "edge-3")
			}
			h := newPlanHarness(t, tier(1, machines...)...)
			h.targetsFn = func() (meshapi.TargetsResult, error) {
				return meshapi.TargetsResult{Targets: h.targets, RelayAbove: c.relayAbove}, nil
			}
			handed := map[string]int{}
			h.outcome = func(m string) *meshapi.PushResult {
				handed[m]++
				if m == "edge-1" || (c.lateAnswers == nil && handed[m] > 1) {
					return converged(uint64(handed[m]))
				}
				return nil
			}
			for i, at := range c.lateAnswers {
				m := machines[i+1]
				h.env.RegisterDelayedCallback(func() {
					for _, r := range h.requests {
						if r.Machine == m {
							h.answer(meshapi.PushResult{Request: r.Request, Plan: r.Plan, Machine: m, Outcome: meshapi.MachineConverged, Seq: 1})
							return
						}
					}
				}, at)
			}
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			require.Equal(t, c.enqueued, h.enqueued)
			if c.relayAbove > 0 {
				first, again := h.requests[1], h.requests[2]
				require.NotEmpty(t, again.ReplyTo)
				require.Equal(t, first, again, "the same request, to the same relay")
			}
		})
	}
}

func TestPlanPauseHoldsNextTier(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	var pause, resume *updateResult
	h.env.RegisterDelayedCallback(func() {
		pause = h.update(meshapi.UpdatePause, meshapi.PauseInput{Reason: "look first"})
	}, 0)
	h.env.RegisterDelayedCallback(func() {
		st := h.query()
		require.Equal(t, meshapi.PlanPaused, st.State)
		require.Empty(t, h.enqueued, "nothing pushed while paused")
		resume = h.update(meshapi.UpdateResume, meshapi.ResumeInput{})
	}, time.Hour)
	st := h.run(meshapi.PlanInput{})
	pause.ok(t)
	resume.ok(t)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Len(t, h.enqueued, 2)
}

func TestPlanAllSupersededEndsSuperseded(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	h.outcome = func(string) *meshapi.PushResult {
		return &meshapi.PushResult{Outcome: meshapi.MachineSuperseded, Reason: "runs generation 9"}
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanSuperseded, st.State, st.Reason)
	require.Len(t, h.enqueued, 2, "each tier is still asked: supersession is per machine")
}

func TestPlanUnknownModuleRefused(t *testing.T) {
	h := newPlanHarness(t)
	h.targetsFn = func() (meshapi.TargetsResult, error) {
		return meshapi.TargetsResult{}, temporal.NewNonRetryableApplicationError(
			`module "nope" is not in the worker's mesh config`, meshapi.ErrUnknownModule, nil)
	}
	st := h.run(meshapi.PlanInput{Module: "nope", Commit: commit})
	require.Equal(t, meshapi.PlanRefused, st.State)
	require.Contains(t, st.Reason, `module "nope" is not in the worker's mesh config`)
}

// A build that fails halts the plan, naming the build, and composes and
// pushes nothing: one that composes too (a plan of one compose batch), and
// one that builds alone (a larger plan).
func TestPlanBuildFailureHalts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		machines  int
		composing int // BuildAndCompose calls
	}{
		{"WhileComposingHalts", 1, 1},
		{"AloneHalts", composeBatch + 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newPlanHarness(t, tier(1, manyMachines(tc.machines)...)...)
			h.failBuild("compile error")
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanHalted, st.State)
			require.Contains(t, st.Reason, "build failed: compile error")
			require.Equal(t, tc.composing, h.buildsComposing)
			require.Empty(t, h.composeBatches)
			require.Empty(t, h.enqueued)
		})
	}
}

func TestPlanComposeFailureNamesMachine(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	h.composeFn = func(in composeCall) (meshapi.ComposeResult, error) {
		if in.Target.Machine == "control-node" {
			return meshapi.ComposeResult{}, temporal.NewNonRetryableApplicationError("host refused report", "X", errors.New("boom"))
		}
		return meshapi.ComposeResult{Declaration: mesh.Declaration{Machine: in.Target.Machine}}, nil
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, "control-node")
	require.Empty(t, h.enqueued, "no push before every machine is composed")
}

func TestPlanRejectsMalformedInput(t *testing.T) {
	for _, in := range []meshapi.PlanInput{
		{Module: "../etc", Commit: commit},
		{Module: "host", Commit: "abc"},
	} {
		t.Run(fmt.Sprintf("%s@%s", in.Module, in.Commit), func(t *testing.T) {
			h := newPlanHarness(t, tier(1, "edge-1")...)
			st := h.run(in)
			require.Equal(t, meshapi.PlanRefused, st.State)
			require.NotEmpty(t, st.Reason)
		})
	}
}

// A plan whose workflow is cancelled withdraws the pushes it has waiting in
// machine queues, and reports the cancellation.
func TestPlanCancelledLeavesMachineQueues(t *testing.T) {
	h := newPlanHarness(t, tier(1, "edge-1", "edge-2")...)
	h.outcome = func(m string) *meshapi.PushResult {
		if m == "edge-1" {
			return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 1}
		}
		return nil
	}
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Hour)
	h.env.ExecuteWorkflow(Plan, meshapi.PlanInput{Module: "host", Commit: commit})
	require.True(t, h.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	require.Len(t, h.cancelled, 1)
	require.Equal(t, meshapi.RequestID(testPlanID, "edge-2"), h.cancelled[0].Request)
}

// A lever whose input does not validate fails for good before its
// activity runs.
func TestLeversRefuseInvalidInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workflow any
		in       any
		says     string
	}{
		{"freeze without a reason", Freeze, meshapi.FreezeInput{Module: "host", By: "alice"}, "a freeze needs reason"},
		{"rejection without a commit", RejectBuild, meshapi.RejectInput{Module: "host", By: "alice", Reason: "leaks"}, "a rejection needs commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := quietSuite().NewTestWorkflowEnvironment()
			env.RegisterActivity(&activities.Activities{})
			env.ExecuteWorkflow(tc.workflow, tc.in)
			require.True(t, env.IsWorkflowCompleted())
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, env.GetWorkflowError(), &appErr)
			require.Equal(t, meshapi.ErrInvalidInput, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), tc.says)
		})
	}
}

// A waiting plan holds one coroutine for all the signals it takes, not one
// per signal name: the footprint of many plans in flight is their
// goroutines. Read from the process's goroutines (a workflow's coroutines
// are goroutines) while the plan waits at a gate, against those before it
// started, so that a goroutine another test left behind is not counted.
func TestPlanTakesItsSignalsInOneCoroutine(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	before, _ := planGoroutines()
	var waiting planCoroutines
	var dump string
	var abort *updateResult
	h.env.RegisterDelayedCallback(func() {
		waiting, dump = planGoroutines()
		abort = h.update(meshapi.UpdateAbort, meshapi.AbortInput{By: "bob", Reason: "seen"})
	}, time.Hour)
	st := h.run(meshapi.PlanInput{Gates: []int{2}})
	abort.ok(t)
	require.Equal(t, meshapi.PlanAborted, st.State)
	require.Equal(t, 1, waiting.plans-before.plans, "one plan waits at its gate; the goroutines:\n%s", dump)
	require.Equal(t, 1, waiting.signals-before.signals, "one coroutine takes the plan's signals; the goroutines:\n%s", dump)
	require.Equal(t, 0, waiting.perName-before.perName, "no coroutine per signal name; the goroutines:\n%s", dump)
}

// planCoroutines counts the process's goroutines that are plans' root
// coroutines, their signal coroutine, or a coroutine per signal name.
type planCoroutines struct{ plans, signals, perName int }

// planGoroutines counts them in a dump of every goroutine, returned too.
func planGoroutines() (planCoroutines, string) {
	buf := make([]byte, 4<<20)
	dump := string(buf[:runtime.Stack(buf, true)])
	var c planCoroutines
	for _, g := range strings.Split(dump, "\n\ngoroutine ") {
		switch {
		case strings.Contains(g, "meshroll/workflows.Plan("):
			c.plans++
		case strings.Contains(g, "(*planSignals).start"):
			c.signals++
		case strings.Contains(g, ".onSignal["):
			c.perName++
		}
	}
	return c, dump
}
