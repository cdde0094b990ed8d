package testsuite

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// largeTierMesh is the example mesh with a tier 1 of n edge machines.
func largeTierMesh(n int) stackOptions {
	o := exampleMesh()
	o.machines = o.machines[:1] // control-node, tier 2
	for i := range n {
		o.machines = append(o.machines, machineSpec{name: fmt.Sprintf("edge-%03d", i), tier: 1, modules: []string{"host"}})
	}
	return o
}

// planTasks counts, from a plan's history on the server, its hand-over
// activities, the answers it was signalled, and its failed workflow tasks.
func (s *stack) planTasks(id string) (handActivities, answers, failedTasks int) {
	s.t.Helper()
	s.eachEvent(id, func(e *historypb.HistoryEvent) {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "HandPushes" {
				handActivities++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == meshapi.SignalPushResult {
				answers++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			failedTasks++
		}
	})
	return handActivities, answers, failedTasks
}

// A tier of 600 machines is handed over by activities of a hundred, once:
// every machine is asked once and answers once. Handed over by one local
// activity, inside the plan's workflow task, the answers buffered behind
// the task passed the server's 100 and it failed
// (WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND), the hand-over ran again,
// every machine answered again, and plans of a thousand machines stalled for
// a minute, of three thousand for good. (A workflow task may still fail on a
// box loaded enough to time one out; it loses nothing, and the plan's
// answers show whether anything was handed twice.)
func TestLargeTierHandedOverOnce(t *testing.T) {
	t.Parallel()
	const n = 600
	s := newStack(t, largeTierMesh(n))
	st := s.converge("host", s.commit("host"))
	require.Len(t, st.Tiers, 2)
	assert.Len(t, st.Tiers[0].Machines, n)
	hand, answers, failed := s.planTasks(st.Plan)
	assert.Equal(t, n/100, hand, "tier 1 handed over by activities of a hundred machines; tier 2's one machine by a local one")
	assert.Equal(t, n+1, answers, "each machine answered once: nothing was handed over twice")
	t.Logf("%d workflow tasks of the plan failed or timed out", failed)
	for _, m := range st.Tiers[0].Machines {
		assert.Equal(t, meshapi.MachineConverged, m.State, "%s: %s", m.Machine, m.Reason)
	}
}
