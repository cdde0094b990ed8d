package testsuite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
)

// largeTierMesh is the example mesh with a tier 1 of n edge machines, and
// plans of more than 100 machines heard through relays.
func largeTierMesh(n int) stackOptions {
	o := exampleMesh()
	o.push = "{relay_above: 100}"
	o.machines = o.machines[:1] // control-node, tier 2
	for i := range n {
		o.machines = append(o.machines, machineSpec{name: fmt.Sprintf("edge-%03d", i), tier: 1, modules: []string{"host"}})
	}
	return o
}

// planHistory is what a plan's history on the server shows of how it
// handed its pushes over and heard their answers.
type planHistory struct {
	// events is the plan's own history's length.
	events int
	// handActivities is its HandPushes activities; relays, its relays,
	// and relayQueues the task queues they were started on.
	handActivities, relays int
	relayQueues            []string
	// signals is the answer signals the plan took (one per answer, or one
	// per bundle from a relay); answers, the answers in them.
	signals, answers int
	// failedTasks is its workflow tasks failed or timed out.
	failedTasks int
	// bytes is its history's size, as the server counts it against its
	// 50 MB limit; plainHands and plainComposes, the hand-overs and
	// compose batches whose input was not compressed.
	bytes, plainHands, plainComposes int
	// handed is the requests its hand-overs gave (a regular activity's
	// when scheduled, a local one's when recorded), and mostOpen the most
	// of them handed and not yet answered at any point of the history.
	handed, mostOpen int
	// markers is the GetVersion change IDs its history records.
	markers []string
}

// planHistoryOf reads a plan's history from the server.
func (s *stack) planHistoryOf(id string) planHistory {
	s.t.Helper()
	var h planHistory
	s.eachEvent(id, func(e *historypb.HistoryEvent) {
		h.events++
		h.bytes += proto.Size(e)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := e.GetActivityTaskScheduledEventAttributes()
			plain := string(a.GetInput().GetPayloads()[0].GetMetadata()[converter.MetadataEncoding]) != "binary/zlib"
			switch a.GetActivityType().GetName() {
			case "HandPushes":
				h.handActivities++
				if plain {
					h.plainHands++
				}
				var in meshapi.HandPushesInput
				require.NoError(s.t, payloads.Converter.FromPayloads(a.GetInput(), &in))
				h.handed += len(in.Requests)
			case "ComposeTargets":
				var in meshapi.ComposeTargetsInput
				require.NoError(s.t, payloads.Converter.FromPayloads(a.GetInput(), &in))
				if plain && len(in.Targets) == 100 {
					h.plainComposes++
				}
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			a := e.GetMarkerRecordedEventAttributes()
			switch a.GetMarkerName() {
			case versionMarker:
				var id string
				require.NoError(s.t, payloads.Converter.FromPayloads(a.GetDetails()[versionMarkerChangeID], &id))
				h.markers = append(h.markers, id)
			case localActivityMarker:
				var data struct{ ActivityType string }
				require.NoError(s.t, payloads.Converter.FromPayloads(a.GetDetails()["data"], &data))
				if res, ok := a.GetDetails()["result"]; ok && data.ActivityType == "HandPushes" {
					var r meshapi.HandPushesResult
					require.NoError(s.t, payloads.Converter.FromPayloads(res, &r))
					h.handed += r.Enqueued
				}
			}
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a.GetWorkflowType().GetName() == meshapi.RelayWorkflowType {
				h.relays++
				h.relayQueues = append(h.relayQueues, a.GetTaskQueue().GetName())
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a := e.GetWorkflowExecutionSignaledEventAttributes()
			switch a.GetSignalName() {
			case meshapi.SignalPushResult:
				h.signals++
				h.answers++
			case meshapi.SignalPushResults:
				var b meshapi.PushResults
				require.NoError(s.t, payloads.Converter.FromPayloads(a.GetInput(), &b))
				h.signals++
				h.answers += len(b.Results)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			h.failedTasks++
		}
		h.mostOpen = max(h.mostOpen, h.handed-h.answers)
	})
	return h
}

// A tier of 600 machines is handed over by activities of a hundred, once,
// and heard through a relay: every machine is asked once and answers once,
// and the plan takes their answers in bundles, so that its history grows
// with bundles, not machines. Handed over by one local activity, inside the
// plan's workflow task, the answers buffered behind the task passed the
// server's 100 and it failed (WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND),
// the hand-over ran again, every machine answered again, and plans of a
// thousand machines stalled for a minute, of three thousand for good. (A
// workflow task may still fail on a box loaded enough to time one out; it
// loses nothing, and the plan's answers show whether anything was handed
// twice.)
func TestLargeTierHandedOverOnce(t *testing.T) {
	t.Parallel()
	const n = 600
	s := newStack(t, largeTierMesh(n))
	st := s.converge("host", s.commit("host"))
	require.Len(t, st.Tiers, 2)
	assert.Len(t, st.Tiers[0].Machines, n)
	h := s.planHistoryOf(st.Plan)
	assert.Equal(t, n/100, h.handActivities, "tier 1 handed over by activities of a hundred machines; tier 2's one machine by a local one")
	assert.Equal(t, 2, h.relays, "a relay for each tier's hand-over")
	for _, q := range h.relayQueues {
		assert.Equal(t, meshapi.RelayTaskQueue(s.cfg.Temporal.TaskQueue), q, "relays run on a task queue of their own, not behind the machine workflows")
	}
	assert.Equal(t, n+1, h.answers, "each machine answered once: nothing was handed over twice")
	assert.LessOrEqual(t, h.signals, meshapi.RelayedSignals(n)+1, "tier 1's answers in bundles")
	t.Logf("the plan's history: %d events, %d bytes for %d machines, %d answer signals; %d workflow tasks failed or timed out",
		h.events, h.bytes, n+1, h.signals, h.failedTasks)
	assert.Less(t, h.events, n/2, "the plan's history grows with bundles, not machines")
	// Its bytes grow with machines, but compressed: a hand-over's hundred
	// requests, a compose batch's targets and declarations, a bundle's
	// answers.
	assert.Zero(t, h.plainHands, "every hand-over of a hundred machines is stored compressed")
	assert.Zero(t, h.plainComposes, "every compose batch of a hundred machines is stored compressed")
	assert.Less(t, h.bytes/(n+1), 100, "history bytes per machine (1,756 with nothing compressed, 120 with compose batches plain)")
	for _, m := range st.Tiers[0].Machines {
		assert.Equal(t, meshapi.MachineConverged, m.State, "%s: %s", m.Machine, m.Reason)
	}
}

// A tier larger than push.hand_window (here 150 machines, a window of 60)
// is handed over as its answers make room: on a real server, its plan's
// history never has more than the window's requests handed and
// unanswered, every machine is handed its push once and answers once,
// and the plan records the change that paces it. Followed with `starter
// merge --wait`, the tier reads as counts, not a name per machine.
func TestLargeTierHandedOverInWindows(t *testing.T) {
	t.Parallel()
	const n, window = 150, 60
	o := largeTierMesh(n)
	o.push = fmt.Sprintf("{relay_above: 100, hand_window: %d}", window)
	s := newStack(t, o)
	commit := s.commit("host")
	out, err := s.starter("merge", "--module", "host", "--commit", commit, "--wait")
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("starter merge --wait printed %d lines:\n%s", len(lines), out)
	assert.Less(t, len(lines), 40, "lines a person can read, not one per answer:\n%s", out)
	assert.Contains(t, out, "tier 1: converged  150 machines, all converged\n")
	for _, l := range lines {
		if strings.Contains(l, "tier 1:") {
			assert.NotContains(t, l, "=", "no machine of the large tier named: none needs a person")
		}
	}
	st := s.wait(meshapi.PlanID("host", commit))
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	out, err = s.starter("plan", "show", st.Plan, "--machines", "failed,refused")
	require.NoError(t, err, out)
	assert.Contains(t, out, "\n  tier 1: 150 machines, all converged\n  tier 2: 1 machine, converged\n", "no machine listed, every tier counted:\n%s", out)
	for _, m := range st.Tiers[0].Machines {
		assert.Equal(t, meshapi.MachineConverged, m.State, "%s: %s", m.Machine, m.Reason)
	}
	h := s.planHistoryOf(st.Plan)
	t.Logf("the plan's history: %d events, %d hand-over activities, most handed and unanswered %d", h.events, h.handActivities, h.mostOpen)
	assert.Equal(t, n+1, h.handed, "every machine handed its push once")
	assert.Equal(t, n+1, h.answers, "and answered once")
	assert.Equal(t, window, h.mostOpen, "the window full, never more")
	assert.Contains(t, h.markers, "plan-hand-window")
}
