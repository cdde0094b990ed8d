package workflows

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// fleetOf is n machines in tier 1 and n in tier 2, named by tier and number.
func fleetOf(n int) []meshapi.Target {
	var ts []meshapi.Target
	for tier := 1; tier <= 2; tier++ {
		for i := range n {
			ts = append(ts, meshapi.Target{Machine: fmt.Sprintf("t%d-m%05d", tier, i), Tier: tier, Modules: []string{"host"}})
		}
	}
	return ts
}

// A tier of 10,000 machines whose answers all arrive before the plan's next
// workflow task is taken in that one task, within the SDK's deadlock
// detector: each answer costs the plan the same whatever the fleet's size.
// Taking an answer by walking every machine made that task quadratic, and
// plans of 2,000 machines and more failed every workflow task for good
// (TMPRL1101). So for answers in bundles from relays, and one by one, as a
// plan started before relays hears them.
//
// The detector is set to 3 s (15 s under the race detector), not a real
// worker's 1 s: on an idle box the plan's longest task here takes 0.1-0.2 s
// (0.2-0.5 s under the race detector), and the quadratic walk, put back by
// hand, took more than 3 s (15 s); CI shares its two CPUs with the
// integration tests, and once stalled a linear task past 5 s.
func TestPlanTakesTenThousandAnswersInOneTask(t *testing.T) {
	const n = 10_000
	for _, relayed := range []bool{true, false} {
		t.Run(fmt.Sprintf("relayed %v", relayed), func(t *testing.T) {
			h := newPlanHarness(t, fleetOf(n)...)
			h.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 3 * raceSlowdown * time.Second})
			// The environment fails a workflow blocked for 3s of wall clock;
			// the hand-over activities buffer 10,000 answers under the race
			// detector, on a box CI shares with the integration tests. Only
			// the plan's own tasks are held to a deadline here, by the
			// detector above.
			h.env.SetTestTimeout(2 * time.Minute)
			h.together = true
			// push.hand_window above the tier: every request handed at once.
			h.targetsFn = func() (meshapi.TargetsResult, error) {
				return meshapi.TargetsResult{Targets: h.targets, HandWindow: 4 * n}, nil
			}
			relays := 0
			if relayed {
				h.env.OnWorkflow(meshapi.RelayWorkflowType, mock.Anything, mock.Anything).Return(
					func(workflow.Context, meshapi.RelayInput) (meshapi.RelayResult, error) {
						relays++
						return meshapi.RelayResult{}, nil
					})
			} else {
				// push.relay_above above the plan: it hears every answer itself.
				h.targetsFn = func() (meshapi.TargetsResult, error) {
					return meshapi.TargetsResult{Targets: h.targets, RelayAbove: 4 * n, HandWindow: 4 * n}, nil
				}
			}
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			converged := 0
			for _, tier := range st.Tiers {
				for _, m := range tier.Machines {
					if assert.Equal(t, meshapi.MachineConverged, m.State, m.Machine) {
						converged++
					}
				}
			}
			assert.Equal(t, 2*n, converged)
			assert.Len(t, h.enqueued, 2*n/handBatch, "each tier handed over by activities of %d machines", handBatch)
			assert.Equal(t, 2*n/handBatch, h.handedByActivity, "as regular activities, not in the plan's workflow task")
			assert.Zero(t, h.handedLocally)
			if relayed {
				assert.Equal(t, 2*n/meshapi.RelaySize, relays, "a relay per thousand requests")
			} else {
				assert.Zero(t, relays)
			}
		})
	}
}

// A hand-over of more than handLocally machines runs as regular activities
// of handBatch machines, so that no workflow task of the plan stays open
// while hundreds of answers arrive (the server fails a task with more than
// 100 signals buffered behind it, and a local hand-over failed with it is
// handed again, and answered again); a few machines are handed by one local
// activity, sparing a small plan the round trips.
func TestPlanHandsLargeTiersOverByActivities(t *testing.T) {
	cases := []struct {
		machines          int
		local, byActivity int
	}{
		{machines: 3, local: 2, byActivity: 0},
		{machines: handLocally, local: 2, byActivity: 0},
		{machines: handLocally + 1, local: 0, byActivity: 2},
		{machines: 250, local: 0, byActivity: 6},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.machines), func(t *testing.T) {
			h := newPlanHarness(t, fleetOf(c.machines)...)
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			assert.Equal(t, c.local, h.handedLocally, "local hand-overs")
			assert.Equal(t, c.byActivity, h.handedByActivity, "hand-over activities")
			handed := 0
			for _, e := range h.enqueued {
				handed += len(e)
				assert.LessOrEqual(t, len(e), max(handBatch, handLocally))
			}
			assert.Equal(t, 2*c.machines, handed, "every machine handed once")
		})
	}
}

// A plan of more than push.relay_above machines (here 100) hears its machines through
// relays, a relay per thousand requests of each hand-over, which pass
// every answer on; a smaller plan hears each machine itself. A relay that
// ends short of its answers halts the plan, in words, rather than leave it
// waiting for good. (A hand-over of more than a relay's thousand is
// split among relays in TestPlanTakesTenThousandAnswersInOneTask: answered
// one by one here, thousands of answers signalled from the hand-over
// activities at once fill the test environment's callback queue, and it
// deadlocks.)
func TestPlanHearsALargeFleetThroughRelays(t *testing.T) {
	cases := []struct {
		name           string
		perTier        int
		relayFails     bool
		relays, bundle int // relays started; answers they passed on
	}{
		{name: "a plan of push.relay_above machines hears each one", perTier: meshapi.RelayAbove / 100, relays: 0},
		{name: "a large plan, a relay per tier", perTier: 300, relays: 2, bundle: 600},
		{name: "a relay that ends short halts the plan", perTier: 300, relayFails: true, relays: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newPlanHarness(t, fleetOf(c.perTier)...)
			h.targetsFn = func() (meshapi.TargetsResult, error) {
				return meshapi.TargetsResult{Targets: h.targets, RelayAbove: meshapi.RelayAbove / 50}, nil
			}
			relays, passed := 0, 0
			if c.relayFails {
				h.env.OnWorkflow(meshapi.RelayWorkflowType, mock.Anything, mock.Anything).Return(
					func(workflow.Context, meshapi.RelayInput) (meshapi.RelayResult, error) {
						relays++
						return meshapi.RelayResult{}, errors.New("terminated by hand")
					})
			}
			h.env.SetOnChildWorkflowCompletedListener(func(_ *workflow.Info, result converter.EncodedValue, err error) {
				if c.relayFails {
					return
				}
				relays++
				var r meshapi.RelayResult
				if assert.NoError(t, err) && assert.NoError(t, result.Get(&r)) {
					passed += r.Answers
				}
			})
			st := h.run(meshapi.PlanInput{})
			assert.Equal(t, c.relays, relays, "relays")
			if c.relayFails {
				require.Equal(t, meshapi.PlanHalted, st.State)
				assert.Contains(t, st.Reason, "tier 1 halted: the relay of 300 machines' answers")
				assert.Contains(t, st.Reason, "terminated by hand")
				return
			}
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			assert.Equal(t, c.bundle, passed, "answers passed on by relays")
			for _, r := range h.requests {
				if c.relays == 0 {
					assert.Empty(t, r.ReplyTo, r.Machine)
				} else {
					assert.Contains(t, r.ReplyTo, st.Plan+"/relay-", r.Machine)
				}
			}
		})
	}
}

// The Web UI's summaries of hand-overs and relays name their machines in
// words that read right for one machine and for many.
func TestMachinesOf(t *testing.T) {
	reqs := func(names ...string) []meshapi.PushRequest {
		var rs []meshapi.PushRequest
		for _, n := range names {
			rs = append(rs, meshapi.PushRequest{Machine: n})
		}
		return rs
	}
	assert.Equal(t, "1 machine, control-node", machinesOf(reqs("control-node")))
	assert.Equal(t, "3 machines, edge-1 to edge-3", machinesOf(reqs("edge-1", "edge-2", "edge-3")))
}

// slowHandOvers is a data converter for which a hand-over's input costs
// d to encode: a box where one part of a large hand-over costs a good part
// of the deadlock detector's second, as compressing a hundred machines'
// requests did under the race detector on a loaded CI box.
type slowHandOvers struct {
	converter.DataConverter
	d time.Duration
}

func (c slowHandOvers) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	for _, v := range values {
		if _, ok := v.(meshapi.HandPushesInput); ok {
			time.Sleep(c.d)
		}
	}
	return c.DataConverter.ToPayloads(values...)
}

// A plan schedules each part of a large hand-over in a coroutine of its
// own, which encodes that part's input, so that no step of its coroutines,
// which the SDK's deadlock detector times, grows with the tier. Here a
// tier's three parts cost 1.8 s against a detector of 1.5 s: scheduled by
// one coroutine, as a plan did, its workflow task fails (TMPRL1101) every
// time it runs, and the plan never ends.
func TestPlanHandsEachPartOverInACoroutineOfItsOwn(t *testing.T) {
	const perTier = 3 * handBatch
	h := newPlanHarness(t, fleetOf(perTier)...)
	h.env.SetDataConverter(slowHandOvers{DataConverter: converter.GetDefaultDataConverter(), d: 600 * time.Millisecond})
	h.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 1500 * time.Millisecond})
	h.env.SetTestTimeout(time.Minute) // the plan's hand-overs take 3.6 s, past the default 3 s
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	assert.Equal(t, 2*3, h.handedByActivity, "each tier in three parts")
	assert.Len(t, h.requests, 2*perTier, "every machine handed once")
}

// A batch larger than push.hand_window is handed over a window at a time:
// at most the window's pushes are handed and unanswered at once, the
// others handed as answers make room, every machine once. A full window
// that hears nothing for push.rehand_after (its machines waiting in line
// behind other plans) hands the next window over anyway, as well as its
// own quiet pushes again, so that a few slow machines do not hold up
// their tier. An abort withdraws the pushes handed over and cancels the
// others, which no machine workflow heard of; a plan that halts mid-batch
// skips them.
func TestPlanHandsALargeBatchOverInItsWindow(t *testing.T) {
	const perTier, window = 1000, 300
	cases := []struct {
		name string
		// stuck are tier 1's first machines, which answer only at
		// answerStuck (never, when 0), however often handed.
		stuck       int
		answerStuck time.Duration
		// trickle answers this many of the oldest unanswered pushes a
		// minute, instead of each push at once.
		trickle int
		abortAt time.Duration
		// relayFails ends the plan's relays at once, short of their
		// answers: the plan halts mid-batch.
		relayFails bool
	}{
		{name: "answers as they come", trickle: 100},
		{name: "a full window that hears nothing hands the next anyway", stuck: window, answerStuck: 25 * time.Minute},
		{name: "an abort withdraws what was handed and cancels the rest", stuck: window, abortAt: 5 * time.Minute},
		{name: "a plan that halts mid-batch skips the rest", stuck: window, relayFails: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newPlanHarness(t, fleetOf(perTier)...)
			h.env.SetTestTimeout(time.Minute)
			h.targetsFn = func() (meshapi.TargetsResult, error) {
				tr := meshapi.TargetsResult{Targets: h.targets, HandWindow: window}
				if c.relayFails {
					tr.RelayAbove = perTier
				}
				return tr, nil
			}
			if c.relayFails {
				h.env.OnWorkflow(meshapi.RelayWorkflowType, mock.Anything, mock.Anything).Return(
					func(workflow.Context, meshapi.RelayInput) (meshapi.RelayResult, error) {
						return meshapi.RelayResult{}, errors.New("terminated by hand")
					})
			}
			stuck := map[string]bool{}
			for i := range c.stuck {
				stuck[fmt.Sprintf("t1-m%05d", i)] = true
			}
			h.outcome = func(m string) *meshapi.PushResult {
				if c.trickle > 0 || stuck[m] {
					return nil
				}
				return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 1}
			}
			requests := func() []meshapi.PushRequest {
				h.mu.Lock()
				defer h.mu.Unlock()
				return slices.Clone(h.requests)
			}
			answer := func(r meshapi.PushRequest) {
				h.answer(meshapi.PushResult{Request: r.Request, Plan: r.Plan, ReplyTo: r.ReplyTo, Machine: r.Machine, Outcome: meshapi.MachineConverged, Seq: 1})
			}
			answered, most := 0, 0
			var notes, waiting string // tier 1's notes and its last machine's reason, at the first minute
			if c.trickle > 0 {
				for m := 1; m <= 2*perTier/c.trickle+5; m++ {
					h.env.RegisterDelayedCallback(func() {
						if m == 1 {
							tier := h.query().Tiers[0]
							notes, waiting = tier.Notes(), tier.Machines[perTier-1].Reason
						}
						reqs := requests()
						most = max(most, len(reqs)-answered)
						for ; answered < min(len(reqs), m*c.trickle); answered++ {
							answer(reqs[answered])
						}
					}, time.Duration(m)*time.Minute)
				}
			}
			handedBefore := 0
			if c.answerStuck > 0 {
				h.env.RegisterDelayedCallback(func() {
					handedBefore = len(setOf(h.handed()))
					for _, r := range requests() {
						if stuck[r.Machine] {
							answer(r)
						}
					}
				}, c.answerStuck)
			}
			var abort *updateResult
			if c.abortAt > 0 {
				h.env.RegisterDelayedCallback(func() {
					abort = h.update(meshapi.UpdateAbort, meshapi.AbortInput{Reason: "stop"})
				}, c.abortAt)
			}
			st := h.run(meshapi.PlanInput{})
			handed := map[string]int{}
			for _, m := range h.handed() {
				handed[m]++
			}
			if c.relayFails {
				require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
				assert.Equal(t, window, len(handed), "the first window handed, nothing after")
				for _, m := range st.Tiers[0].Machines[window:] {
					assert.Equal(t, meshapi.MachineSkipped, m.State, m.Machine)
					assert.Equal(t, "never handed over: the plan ended first", m.Reason, m.Machine)
				}
				return
			}
			if c.abortAt > 0 {
				abort.ok(t)
				require.Equal(t, meshapi.PlanAborted, st.State, st.Reason)
				assert.Equal(t, window, len(h.cancelled), "a withdrawal for each push handed over, none for the others")
				assert.Equal(t, window, len(handed), "the first window handed, nothing after")
				for _, m := range st.Tiers[0].Machines[window:] {
					assert.Equal(t, meshapi.MachineCancelled, m.State, m.Machine)
					assert.Equal(t, "aborted: stop (its push was never handed over)", m.Reason, m.Machine)
				}
				assert.Equal(t, meshapi.TierSkipped, st.Tiers[1].State)
				return
			}
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			assert.Equal(t, 2*perTier, len(handed), "every machine handed its push")
			for m, n := range handed {
				if stuck[m] {
					assert.Equal(t, 2, n, "%s: a quiet push handed again once", m)
				} else {
					assert.Equal(t, 1, n, "%s: handed once", m)
				}
			}
			for _, e := range h.enqueued {
				assert.LessOrEqual(t, len(e), handBatch)
			}
			if c.trickle > 0 {
				assert.Equal(t, window, most, "the window full, and never more, between answers")
				assert.Equal(t, " (handed over 300 at a time)", notes)
				assert.Equal(t, "waits its turn: the plan has 300 pushes handed over and unanswered at most (push.hand_window)", waiting)
				assert.Empty(t, st.Tiers[0].Machines[perTier-1].Reason, "its answer says what happened")
			}
			if c.answerStuck > 0 {
				assert.Equal(t, 2*window, handedBefore, "the next window handed after push.rehand_after, while the first waits")
			}
		})
	}
}
