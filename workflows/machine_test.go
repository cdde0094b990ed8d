package workflows

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/activities"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// machineHarness runs the machine workflow in the SDK's test environment with
// a fake push activity and records every push and every answer.
type machineHarness struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	pushes  []meshapi.PushInput
	mu      sync.Mutex // answers are signalled from the environment's goroutines
	answers []meshapi.PushResult
	// push decides a push's outcome; default: converged at the proposed seq.
	push func(in meshapi.PushInput) (meshapi.PushOutcome, error)
	// delay is how long each push takes in the environment's clock.
	delay time.Duration
	// local marks every request Local: every push must then start as a
	// local activity, and none as a regular one.
	local bool
	// started counts pushes started as regular and as local activities.
	started struct{ regular, local int }
}

// pushModes are the two ways a machine workflow runs its pushes; the
// tests of what it does with them run in both.
var pushModes = []struct {
	name  string
	local bool
}{{"activity", false}, {"local activity", true}}

// eachPushMode runs test once per push mode, with a harness in that mode.
func eachPushMode(t *testing.T, test func(t *testing.T, h *machineHarness)) {
	for _, m := range pushModes {
		t.Run(m.name, func(t *testing.T) {
			h := newMachineHarness(t)
			h.local = m.local
			test(t, h)
		})
	}
}

func newMachineHarness(t *testing.T) *machineHarness {
	h := &machineHarness{t: t, env: quietSuite().NewTestWorkflowEnvironment()}
	h.env.RegisterWorkflowWithOptions(Machine, workflow.RegisterOptions{Name: meshapi.MachineWorkflowType})
	h.env.RegisterActivity(&activities.Activities{})
	return h
}

// install sets up the fakes; pushes take h.delay of the environment's clock,
// so that requests signalled meanwhile find one in flight.
func (h *machineHarness) install() {
	push := func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
		h.pushes = append(h.pushes, in)
		if h.push != nil {
			return h.push(in)
		}
		return meshapi.PushOutcome{Outcome: meshapi.MachineConverged, Seq: in.Seq, Sent: true}, nil
	}
	// PushAndAnswer answers the plan itself when the push succeeded, as
	// the real one signals it.
	h.env.OnActivity(acts.PushAndAnswer, mock.Anything, mock.Anything).After(h.delay).Return(
		func(_ context.Context, in meshapi.PushInput) (meshapi.PushOutcome, error) {
			out, err := push(in)
			if err == nil {
				r := in.Request
				h.mu.Lock()
				h.answers = append(h.answers, meshapi.PushResult{Request: r.Request, Plan: r.Plan, Machine: r.Machine,
					Outcome: out.Outcome, Reason: out.Reason, Seq: out.Seq, Rebased: out.Rebased})
				h.mu.Unlock()
			}
			return out, err
		})
	h.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { h.started.regular++ })
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []interface{}) {
		if info.ActivityType.Name != "AskLease" { // the fleet budget's ask is no push
			h.started.local++
		}
	})
	recordSignals(h.env, &h.mu, meshapi.SignalPushResult, &h.answers)
}

// recordSignals appends, under mu, what the workflow signals to another
// workflow with signal to into.
func recordSignals[T any](env *testsuite.TestWorkflowEnvironment, mu *sync.Mutex, signal string, into *[]T) {
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", signal, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			mu.Lock()
			defer mu.Unlock()
			*into = append(*into, arg.(T))
			return nil
		})
}

// quietSuite is a test suite whose SDK logs are dropped: the assertions say
// what matters.
func quietSuite() *testsuite.WorkflowTestSuite {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	return &s
}

func req(plan, module string, gen int64) meshapi.PushRequest {
	b := mesh.Build{Module: module, Commit: fmt.Sprintf("%040x", gen), Digest: fmt.Sprintf("sha256:%064x", gen), Generation: gen}
	return meshapi.PushRequest{
		Request: meshapi.RequestID(plan, "m1"), Plan: plan, Machine: "m1", Build: b,
		Declaration: mesh.Declaration{Machine: "m1", Plan: plan, Containers: []mesh.Container{{Module: module, Digest: b.Digest, Generation: gen}}},
	}
}

// signalAt delivers requests at a point of the environment's clock.
func (h *machineHarness) signalAt(d time.Duration, rs ...meshapi.PushRequest) {
	h.env.RegisterDelayedCallback(func() {
		for _, r := range rs {
			r.Local = h.local
			h.env.SignalWorkflow(meshapi.SignalPush, r)
		}
	}, d)
}

// run starts the workflow, in the harness's push mode, and returns the
// input it continued-as-new with, after checking that every push ran as
// that mode says.
func (h *machineHarness) run(in meshapi.MachineInput) meshapi.MachineInput {
	h.t.Helper()
	h.install()
	h.env.ExecuteWorkflow(Machine, in)
	want := struct{ regular, local int }{regular: len(h.pushes)}
	if h.local {
		want.regular, want.local = 0, len(h.pushes)
	}
	require.Equal(h.t, want, h.started, "pushes started as regular and local activities (local push: %v)", h.local)
	require.True(h.t, h.env.IsWorkflowCompleted())
	err := h.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(h.t, err, &can, "machine workflow should end by continuing as new")
	var next meshapi.MachineInput
	require.NoError(h.t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

func (h *machineHarness) answer(request string) (meshapi.PushResult, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.answers {
		if a.Request == request {
			return a, true
		}
	}
	return meshapi.PushResult{}, false
}

func TestMachineServesFiftyQueuedPushesInOrder(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		var rs []meshapi.PushRequest
		for i := range 50 {
			rs = append(rs, req(fmt.Sprintf("plan/m%02d/x", i), fmt.Sprintf("m%02d", i), int64(i+1)))
		}
		h.signalAt(0, rs...)
		next := h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 50})

		require.Len(t, h.pushes, 50, "every queued push is served")
		for i, p := range h.pushes {
			if p.Request.Request != rs[i].Request {
				t.Fatalf("push %d served %s, want %s (queue order)", i, p.Request.Request, rs[i].Request)
			}
			if p.Seq != uint64(i+1) {
				t.Errorf("push %d proposed seq %d, want %d", i, p.Seq, i+1)
			}
		}
		require.Len(t, h.answers, 50, "every plan gets its answer")
		for i, r := range rs {
			a, ok := h.answer(r.Request)
			require.True(t, ok, "plan %d answered", i)
			require.Equal(t, meshapi.MachineConverged, a.Outcome)
			require.Equal(t, uint64(i+1), a.Seq, "answered with the sequence its push was sent with")
		}
		require.Equal(t, uint64(50), next.LastSeq)
		require.Empty(t, next.Queue)
	})
}

func TestMachineNewestBuildSupersedesQueued(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		first := req("plan/ctl/a", "ctl", 1)
		old := req("plan/host/b", "host", 2)
		newer := req("plan/host/c", "host", 3)
		older := req("plan/host/d", "host", 1)
		// first is in flight (pushes take a minute) when the others arrive.
		h.delay = time.Minute
		h.signalAt(0, first)
		h.signalAt(time.Second, old, newer, older)
		var seen meshapi.MachineState
		h.env.RegisterDelayedCallback(func() {
			v, err := h.env.QueryWorkflow(meshapi.QueryState)
			require.NoError(t, err)
			require.NoError(t, v.Get(&seen))
		}, 2*time.Second)
		h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})

		require.NotNil(t, seen.Current, "the query says what is in flight")
		require.Equal(t, first.Request, seen.Current.Request)
		require.Len(t, seen.Queue, 1, "and what waits: only the newest host build")
		require.Equal(t, int64(3), seen.Queue[0].Generation)

		var served []string
		for _, p := range h.pushes {
			served = append(served, p.Request.Plan)
		}
		require.Equal(t, []string{first.Plan, newer.Plan}, served, "only the newest queued build of host is pushed")
		for _, r := range []meshapi.PushRequest{old, older} {
			a, ok := h.answer(r.Request)
			require.True(t, ok, "%s answered", r.Plan)
			require.Equal(t, meshapi.MachineSuperseded, a.Outcome, "%s: %s", r.Plan, a.Reason)
			require.Contains(t, a.Reason, "newer build of host")
		}
	})
}

func TestMachineDuplicateRequestsPushOnce(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		r := req("plan/host/a", "host", 1)
		other := req("plan/ctl/b", "ctl", 1)
		h.signalAt(0, r, r)
		// Re-delivered after it was answered: answered again, not pushed.
		h.signalAt(time.Hour, r, other)
		h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})

		require.Len(t, h.pushes, 2, "one push for the request, one for the other")
		n := 0
		for _, a := range h.answers {
			if a.Request == r.Request {
				n++
				require.Equal(t, meshapi.MachineConverged, a.Outcome)
				require.Equal(t, uint64(1), a.Seq)
			}
		}
		require.Equal(t, 2, n, "the re-delivered request is answered again with the first answer")
	})
}

func TestMachineContinueAsNewCarriesSequenceAndQueue(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		var rs []meshapi.PushRequest
		for i := range 5 {
			rs = append(rs, req(fmt.Sprintf("plan/m%d/x", i), fmt.Sprintf("m%d", i), 1))
		}
		h.signalAt(0, rs...)
		next := h.run(meshapi.MachineInput{Machine: "m1", LastSeq: 40, ContinueAfter: 2})

		require.Len(t, h.pushes, 2)
		require.Equal(t, uint64(41), h.pushes[0].Seq, "numbering continues from the carried sequence")
		require.Equal(t, uint64(42), next.LastSeq)
		var queued []string
		for _, q := range next.Queue {
			queued = append(queued, q.Request)
		}
		require.Equal(t, []string{rs[2].Request, rs[3].Request, rs[4].Request}, queued, "the rest of the queue, in order")
		require.Len(t, next.Recent, 2)
		require.Equal(t, 2, next.ContinueAfter)
		for _, q := range next.Queue {
			require.Equal(t, h.local, q.Local, "a queued request keeps its push mode across continue-as-new")
		}
	})
}

// TestMachinePushModeFollowsEachRequest: a machine workflow pushes each
// request as the request says (the handing worker's push.local_activity),
// so that turning the setting on or off reaches a machine workflow that has
// run for months at its next push.
func TestMachinePushModeFollowsEachRequest(t *testing.T) {
	h := newMachineHarness(t)
	h.install()
	modes := []bool{true, false, false, true, true}
	h.env.RegisterDelayedCallback(func() {
		for i, local := range modes {
			r := req(fmt.Sprintf("plan/m%d/x", i), fmt.Sprintf("m%d", i), 1)
			r.Local = local
			h.env.SignalWorkflow(meshapi.SignalPush, r)
		}
	}, 0)
	h.env.ExecuteWorkflow(Machine, meshapi.MachineInput{Machine: "m1", ContinueAfter: len(modes)})
	require.Len(t, h.pushes, len(modes))
	require.Equal(t, struct{ regular, local int }{regular: 2, local: 3}, h.started)
}

func TestMachineFollowsHostSequence(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		h.push = func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
			seq := in.Seq
			if seq < 10 {
				seq = 10 // the host outlived a reset and was already at 9
			}
			return meshapi.PushOutcome{Outcome: meshapi.MachineConverged, Seq: seq, Sent: true}, nil
		}
		h.signalAt(0, req("plan/a/x", "a", 1), req("plan/b/x", "b", 1))
		next := h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})
		require.Equal(t, uint64(11), h.pushes[1].Seq, "the next proposal follows the host's sequence")
		require.Equal(t, uint64(11), next.LastSeq)
	})
}

func TestMachineRefusalAndFailureAnswered(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		h.push = func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
			if in.Request.Build.Module == "a" {
				out := meshapi.PushOutcome{Outcome: meshapi.MachineRefused, Reason: "unknown digest"}
				return out, temporal.NewNonRetryableApplicationError("machine m1 runs x at an unknown digest", meshapi.ErrUnknownDigest, nil, out)
			}
			out := meshapi.PushOutcome{Outcome: meshapi.MachineFailed, Seq: in.Seq, Sent: true}
			return out, temporal.NewNonRetryableApplicationError("b is crash-looping", meshapi.ErrUnhealthy, nil, out)
		}
		a, b := req("plan/a/x", "a", 1), req("plan/b/x", "b", 1)
		h.signalAt(0, a, b)
		next := h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})

		ra, _ := h.answer(a.Request)
		require.Equal(t, meshapi.MachineRefused, ra.Outcome)
		require.Contains(t, ra.Reason, "unknown digest")
		rb, _ := h.answer(b.Request)
		require.Equal(t, meshapi.MachineFailed, rb.Outcome)
		require.Contains(t, rb.Reason, "crash-looping")
		require.Equal(t, uint64(1), rb.Seq, "a sent declaration's sequence is kept even when it failed")
		require.Equal(t, uint64(1), next.LastSeq)
	})
}

func TestMachineCancelledRequestLeavesQueue(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		h.delay = time.Minute
		a, b, c := req("plan/a/x", "a", 1), req("plan/b/x", "b", 1), req("plan/c/x", "c", 1)
		h.signalAt(0, a, b, c)
		h.env.RegisterDelayedCallback(func() {
			h.env.SignalWorkflow(meshapi.SignalCancelPush, meshapi.CancelPush{Request: b.Request, Reason: "aborted"})
		}, time.Second)
		h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})
		var served []string
		for _, p := range h.pushes {
			served = append(served, p.Request.Plan)
		}
		require.Equal(t, []string{a.Plan, c.Plan}, served, "the withdrawn request is never pushed")
	})
}

// The machine workflow keeps its own floor: raised by a push that sent and
// converged (never lowered, never by one that sent nothing), handed to
// every later push, and carried across continue-as-new, so that a host
// that loses its state is not the only memory of what ran there.
func TestMachineKeepsItsOwnFloor(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		h.push = func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
			out := meshapi.PushOutcome{Outcome: meshapi.MachineConverged, Seq: in.Seq, Sent: true, Declaration: in.Request.Declaration}
			if in.Request.Plan == "plan/host/superseded" {
				out = meshapi.PushOutcome{Outcome: meshapi.MachineSuperseded, Declaration: in.Request.Declaration}
			}
			return out, nil
		}
		ctl3, superseded, ctl2, host1 := req("plan/ctl/a", "ctl", 3), req("plan/host/superseded", "host", 5), req("plan/ctl/b", "ctl", 2), req("plan/host/c", "host", 1)
		h.signalAt(0, ctl3)
		h.signalAt(time.Minute, superseded)
		h.signalAt(2*time.Minute, ctl2)
		h.signalAt(3*time.Minute, host1)
		next := h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 4})

		require.Len(t, h.pushes, 4)
		require.Empty(t, h.pushes[0].Floor, "nothing has run healthy yet")
		wantFloor := map[string]mesh.Container{"ctl": ctl3.Declaration.Containers[0]}
		require.Equal(t, wantFloor, h.pushes[1].Floor, "raised by the converged push")
		require.Equal(t, wantFloor, h.pushes[2].Floor, "not raised by a push that sent nothing")
		require.Equal(t, wantFloor, h.pushes[3].Floor, "never lowered by an older build")
		wantFloor["host"] = host1.Declaration.Containers[0]
		require.Equal(t, wantFloor, next.Floor, "carried across continue-as-new")

		h2 := newMachineHarness(t)
		h2.local = h.local
		h2.signalAt(0, req("plan/x/d", "x", 1))
		h2.run(meshapi.MachineInput{Machine: "m1", Floor: next.Floor, ContinueAfter: 1})
		require.Equal(t, wantFloor, h2.pushes[0].Floor, "the next run pushes with the floor it was given")
	})
}

// The machine workflow's current details say, for a person in the Web UI,
// what it pushes, what waits and what runs; what runs is carried across
// continue-as-new.
func TestMachineDetailsSayWhatRunsAndWhatWaits(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		h.delay = time.Minute
		h.push = func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
			d := in.Request.Declaration
			d.Seq = in.Seq
			return meshapi.PushOutcome{Outcome: meshapi.MachineConverged, Seq: in.Seq, Sent: true, Declaration: d}, nil
		}
		r1, r2 := req("plan/host/1", "host", 1), req("plan/host/2", "host", 2)
		h.signalAt(0, r1, r2)
		details := map[time.Duration]string{}
		for _, at := range []time.Duration{30 * time.Second, 90 * time.Second} {
			h.env.RegisterDelayedCallback(func() {
				details[at] = currentDetails(t, h.env)
			}, at)
		}
		next := h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})

		first := details[30*time.Second]
		require.Contains(t, first, "**m1**: pushing host generation 1 (sha256:")
		require.Contains(t, first, "- runs: not known to this workflow yet")
		require.Contains(t, first, "- queue (1): host generation 2 (sha256:")
		second := details[90*time.Second]
		require.Contains(t, second, "**m1**: pushing host generation 2 (sha256:")
		require.Contains(t, second, "- runs, as its last converged push found it: host generation 1 (sha256:")
		require.Contains(t, second, "- last sequence sent: 1, by plan/host/1")
		require.Contains(t, second, "- queue: empty")
		require.NotNil(t, next.Running, "what runs is carried across continue-as-new")
		require.Equal(t, uint64(2), next.Running.Seq)
		require.Equal(t, int64(2), next.Running.Containers[0].Generation)
	})
}

// A machine with more requests than one run may take signals for serves
// them all, in order, numbered without a gap: the run continues as new
// once its signals reach its budget (the server refuses a run's signals
// past 10,000, and its own suggestion does not count them), carrying the
// requests it took and has not pushed.
func TestMachineContinuesAsNewBeforeItsSignalBudget(t *testing.T) {
	eachPushMode(t, func(t *testing.T, h *machineHarness) {
		const budget, n = 5, 12
		var rs []meshapi.PushRequest
		for i := range n {
			rs = append(rs, req(fmt.Sprintf("plan/m%02d/x", i), fmt.Sprintf("m%02d", i), 1))
		}
		h.signalAt(0, rs...)
		next := h.run(meshapi.MachineInput{Machine: "m1", SignalBudget: budget})
		require.Len(t, h.pushes, 1, "the run continues as new after the push in flight when its budget was reached")
		require.Len(t, next.Queue, n-1, "carrying every request it took and has not pushed")
		require.Equal(t, budget, next.SignalBudget, "the budget is carried")

		// The next run serves the rest: no request lost, none pushed twice.
		second := newMachineHarness(t)
		second.local = h.local
		last := second.run(meshapi.MachineInput{Machine: "m1", LastSeq: next.LastSeq, Queue: next.Queue,
			Recent: next.Recent, SignalBudget: next.SignalBudget, ContinueAfter: len(next.Queue)})
		served := append(h.pushes, second.pushes...)
		require.Len(t, served, n)
		for i, p := range served {
			require.Equal(t, rs[i].Request, p.Request.Request, "push %d in queue order", i)
			require.Equal(t, uint64(i+1), p.Seq, "push %d numbered without a gap", i)
		}
		require.Empty(t, last.Queue)
	})
}
