package testsuite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// localActivityMarker is the name the Go SDK gives the marker that records
// a local activity's result in a history, and versionMarker the one that
// records a GetVersion, its change ID under versionMarkerChangeID.
const (
	localActivityMarker   = "LocalActivity"
	versionMarker         = "Version"
	versionMarkerChangeID = "change-id"
)

// With push.local_activity, plans converge as they do with regular
// activities, under the same invariants, and the machine workflows the
// plans start push by local activities only: no activity task is ever
// scheduled for a push, and each push leaves its marker in the history.
// Then the operator turns the setting off, and back on: the machine
// workflows already running follow it at their next push.
func TestLocalPushConverges(t *testing.T) {
	t.Parallel()
	o := exampleMesh()
	o.push = "{local_activity: true}"
	s := newStack(t, o)
	require.True(t, s.cfg.Push.LocalActivity, "the stack's config asks for local pushes")

	h1, k1 := s.commit("host"), s.commit("mesh-controller")
	s.converge("host", h1)
	s.converge("mesh-controller", k1)
	// The third plan finds both machine workflows running.
	h2 := s.commit("host")
	s.converge("host", h2)

	for _, m := range []string{"control-node", "edge-1"} {
		s.checkJournal(m)
	}
	s.runs("control-node", s.build("host", h2), s.build("mesh-controller", k1))
	s.runs("edge-1", s.build("host", h2))

	for machine, pushes := range map[string]int{"control-node": 3, "edge-1": 2} {
		// The push answers the plan itself, so the plan can end before the
		// machine workflow's task that ran it, and its marker, is recorded.
		var scheduled, markers int
		eventually(t, 30*time.Second, machine+"'s last push recorded", func() bool {
			scheduled, markers = s.pushEvents(meshapi.MachineID(machine))
			return markers >= pushes || scheduled > 0
		})
		require.Zero(t, scheduled, "%s: no push ran as a regular activity", machine)
		require.GreaterOrEqual(t, markers, pushes, "%s: every push left a local activity marker", machine)
	}

	id := meshapi.MachineID("control-node")
	run := lastRun(t, s, id)
	flip := func(local bool) (scheduled, markers int) {
		s.worker.Stop()
		s.cfg.Push.LocalActivity = local
		s.startWorker()
		s.converge("host", s.commit("host"))
		require.Equal(t, run, lastRun(t, s, id), "the machine workflow ran on, the same run")
		return s.pushEvents(id)
	}
	before, marked := s.pushEvents(id)
	scheduled, markers := flip(false)
	require.Equal(t, before+1, scheduled, "push.local_activity off: the running machine workflow's next push is a regular activity")
	require.Equal(t, marked, markers)
	scheduled, markers = flip(true)
	require.Equal(t, before+1, scheduled, "push.local_activity on again: no activity task")
	require.Equal(t, marked+1, markers, "push.local_activity on again: a local activity")
	s.checkJournal("control-node")
}

// pushEvents counts, in the history of workflow id's current run, the
// activity tasks scheduled and the local activity markers recorded.
func (s *stack) pushEvents(id string) (scheduled, markers int) {
	s.t.Helper()
	s.eachEvent(id, func(e *historypb.HistoryEvent) {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if e.GetMarkerRecordedEventAttributes().GetMarkerName() == localActivityMarker {
				markers++
			}
		}
	})
	return scheduled, markers
}

// eachEvent calls fn with every event of workflow id's current run, in
// order.
func (s *stack) eachEvent(id string, fn func(*historypb.HistoryEvent)) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := s.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(s.t, err)
		fn(e)
	}
}
