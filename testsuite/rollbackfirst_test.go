package testsuite

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// A rollback started behind 50 merge plans queued on one machine reaches
// the machine right after the push in flight, as the host's journal shows:
// the rollback's declaration is the one applied next. Its plan workflow and
// the machine workflow's push of it carry the rollback task priority, and
// the merge pushes do not.
func TestRollbackOvertakesFiftyQueuedPlans(t *testing.T) {
	t.Parallel()
	const n = 50
	s := newStack(t, rollbackMesh(n))
	rollback, inFlight := s.rollbackBehindQueue(n)

	s.checkJournal("busy")
	applied := s.hosts["busy"].Applied()
	require.Len(t, applied, 2+n+1, "two builds of urgent, one declaration per merge plan, the rollback")
	require.Equal(t, inFlight, applied[2].Plan, "the push in flight when the rollback came is applied first, not interrupted")
	require.Equal(t, rollback, applied[3].Plan, "the rollback's declaration is applied right after the push in flight")
	require.True(t, applied[3].Rollback)
	for _, d := range applied[4:] {
		require.NotEqual(t, rollback, d.Plan)
	}

	require.Equal(t, int32(meshapi.RollbackPriority), s.priorityOf(rollback, workflowStarted), "the rollback plan's workflow priority")
	machine := meshapi.MachineID("busy")
	require.Equal(t, int32(meshapi.RollbackPriority), s.priorityOf(machine, scheduledPush(rollback)), "the rollback's push activity priority")
	require.Zero(t, s.priorityOf(machine, scheduledPush(inFlight)), "a merge push keeps the default priority")
}

// rollbackMesh is one machine, busy, running urgent (the module rolled
// back) and n more modules whose merge plans queue on it.
func rollbackMesh(n int) stackOptions {
	o := stackOptions{modules: []string{"urgent"}, push: "{retry_budget: 5m}"}
	for i := range n {
		o.modules = append(o.modules, fmt.Sprintf("m%02d", i))
	}
	o.machines = []machineSpec{{name: "busy", tier: 0, modules: o.modules}}
	return o
}

// rollbackBehindQueue puts urgent on two builds, holds busy's host so that
// the first of n merge plans stays in flight while the others queue behind
// it, starts a rollback of urgent behind them all, and lets the host go
// once the machine has taken it. It returns the rollback's plan ID and the
// plan whose push was in flight when the rollback came.
func (s *stack) rollbackBehindQueue(n int) (rollback, inFlight string) {
	s.t.Helper()
	s.converge("urgent", s.commit("urgent"))
	s.converge("urgent", s.commit("urgent"))
	head := s.git("rev-parse", "HEAD")

	release := s.hosts["busy"].Hold()
	var ids []string
	for i := range n {
		ids = append(ids, s.start(fmt.Sprintf("m%02d", i), head).ID)
	}
	st := s.machineStateWhen(func(st meshapi.MachineState) bool { return st.Current != nil && len(st.Queue) == n-1 })
	inFlight = st.Current.Plan

	started, err := plans.Start(context.Background(), s.c, s.cfg.Temporal.TaskQueue, meshapi.PlanInput{
		Module: "urgent", Policy: s.cfg.PushPolicy(), Rollback: &meshapi.Rollback{By: "test", Reason: "on fire"},
	})
	require.NoError(s.t, err)
	rollback = started.ID
	s.machineStateWhen(func(st meshapi.MachineState) bool { return len(st.Queue) == n })
	release()

	for _, id := range append(ids, rollback) {
		st := s.wait(id)
		require.Equal(s.t, meshapi.PlanConverged, st.State, "%s: %s", id, st.Reason)
	}
	return rollback, inFlight
}

// machineStateWhen asks busy's machine workflow for its state until ready
// says it is what the test waits for, and returns it.
func (s *stack) machineStateWhen(ready func(meshapi.MachineState) bool) meshapi.MachineState {
	s.t.Helper()
	return s.stateOf("busy", ready)
}

// priorityOf is the priority key of the first event of workflow id that
// carries one of kind, matched by pick (0: the default).
func (s *stack) priorityOf(id string, pick func(*historypb.HistoryEvent) (int32, bool)) int32 {
	s.t.Helper()
	var key int32
	found := false
	s.eachEvent(id, func(e *historypb.HistoryEvent) {
		if k, ok := pick(e); ok && !found {
			key, found = k, true
		}
	})
	require.True(s.t, found, "no event of %s matched", id)
	return key
}

// scheduledPush picks the ActivityTaskScheduled event of a push whose
// summary names plan, with its priority key.
func scheduledPush(plan string) func(*historypb.HistoryEvent) (int32, bool) {
	return func(e *historypb.HistoryEvent) (int32, bool) {
		if e.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			return 0, false
		}
		if !strings.Contains(string(e.GetUserMetadata().GetSummary().GetData()), plan) {
			return 0, false
		}
		return e.GetActivityTaskScheduledEventAttributes().GetPriority().GetPriorityKey(), true
	}
}

// workflowStarted picks the WorkflowExecutionStarted event, with its
// priority key.
func workflowStarted(e *historypb.HistoryEvent) (int32, bool) {
	if e.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
		return 0, false
	}
	return e.GetWorkflowExecutionStartedEventAttributes().GetPriority().GetPriorityKey(), true
}

// TestCaptureRollbackFirstHistory records a machine workflow that serves a
// rollback before the merge pushes queued ahead of it (change
// rollbacks-first): three merge plans queue on busy, the first in flight,
// and a rollback of urgent comes behind them. Like the other captures it
// runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureRollbackFirstHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	s := captureStack(t, rollbackMesh(3))
	s.rollbackBehindQueue(3)

	s.writeHistories(capturedRun{"machine-rollback-first", meshapi.MachineID("busy"), ""})
}
