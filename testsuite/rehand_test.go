package testsuite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// A machine workflow terminated by hand while it holds a plan's push takes
// the request with it; the plan, hearing nothing for push.rehand_after,
// hands the push again, which starts the machine's next workflow, and the
// plan converges instead of waiting for ever.
func TestPlanHandsPushesAgainToATerminatedMachineWorkflow(t *testing.T) {
	t.Parallel()
	s, plan, _ := terminatedMidPush(t, newStack)
	st := s.wait(plan)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	s.runs("edge-1", s.build("host", st.Commit))
	s.checkJournal("edge-1")
}

// TestCaptureRehandHistories records a plan that handed a push again after
// its machine workflow was terminated, and that machine's terminated run.
// It runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureRehandHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	s, plan, terminated := terminatedMidPush(t, captureStack)
	require.Equal(t, meshapi.PlanConverged, s.wait(plan).State)
	s.writeHistories(
		capturedRun{"plan-rehanded", plan, ""},
		capturedRun{"machine-terminated-mid-push", meshapi.MachineID("edge-1"), terminated},
	)
}

// terminatedMidPush stands up the example mesh (on a stack from newStack
// or captureStack) with edge-1's host refusing declarations and push.rehand_after 2s,
// starts a host plan, terminates edge-1's machine workflow while its push
// retries, and brings the host back: it returns the stack, the plan and
// the terminated run.
func terminatedMidPush(t *testing.T, stackOf func(*testing.T, stackOptions) *stack) (*stack, string, string) {
	t.Helper()
	o := exampleMesh()
	o.push = "{retry_budget: 5m, running_timeout: 30s, rehand_after: 2s}"
	s := stackOf(t, o)
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	s.hosts["edge-1"].SetPostsDown(true)
	plan := s.start("host", h1).ID

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	machine := meshapi.MachineID("edge-1")
	var run string
	require.Eventually(t, func() bool {
		d, err := s.c.DescribeWorkflow(ctx, machine, "")
		if err != nil || len(d.RawResponse.GetPendingActivities()) == 0 {
			return false
		}
		run = d.WorkflowExecution.RunID
		return true
	}, time.Minute, pollEvery, "edge-1's machine workflow never pushed")
	require.NoError(t, s.c.TerminateWorkflow(ctx, machine, run, "terminated by hand mid-push"))
	d, err := s.c.DescribeWorkflow(ctx, machine, run)
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, d.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	s.hosts["edge-1"].SetPostsDown(false)
	return s, plan, run
}
