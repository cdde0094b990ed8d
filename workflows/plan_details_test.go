package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// testPlanID is a plan's workflow ID in the test environment.
const testPlanID = "default-test-workflow-id"

// currentDetails is what the Web UI shows as the workflow's current
// details now.
func currentDetails(t testing.TB, env *testsuite.TestWorkflowEnvironment) string {
	t.Helper()
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// While a tier of hundreds pushes, the Web UI's current details count its
// machines by state as their answers come, and name the failed ones: a
// person watching a large tier sees it move and what needs them, not the
// words the plan wrote when it handed the tier over ("300 waiting").
func TestPlanDetailsCountATierAsItsAnswersCome(t *testing.T) {
	const n = 300
	var ts []meshapi.Target
	for i := range n {
		ts = append(ts, meshapi.Target{Machine: fmt.Sprintf("m%03d", i), Tier: 1, Modules: []string{"host"}})
	}
	h := newPlanHarness(t, ts...)
	// The first half answers at once, seven of them failed; the rest only
	// when the test says, after the details are read.
	h.outcome = func(machine string) *meshapi.PushResult {
		var i int
		_, _ = fmt.Sscanf(machine, "m%d", &i)
		switch {
		case i >= n/2:
			return nil
		case i%10 == 7 && i < 70:
			return &meshapi.PushResult{Outcome: meshapi.MachineFailed, Reason: "host unreachable"}
		}
		return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 1}
	}
	var during string
	var summary, whole meshapi.PlanState
	h.env.RegisterDelayedCallback(func() {
		during = currentDetails(t, h.env)
		for name, st := range map[string]*meshapi.PlanState{meshapi.QuerySummary: &summary, meshapi.QueryState: &whole} {
			v, err := h.env.QueryWorkflow(name)
			require.NoError(t, err, name)
			require.NoError(t, v.Get(st), name)
		}
	}, time.Minute)
	h.env.RegisterDelayedCallback(func() {
		for i := n / 2; i < n; i++ {
			m := fmt.Sprintf("m%03d", i)
			h.answer(meshapi.PushResult{Request: meshapi.RequestID(testPlanID, m), Plan: testPlanID,
				Machine: m, Outcome: meshapi.MachineConverged, Seq: 1})
		}
	}, 2*time.Minute)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanHalted, st.State, "seven failed of none allowed: %s", st.Reason)

	assert.Contains(t, during, "- tier 1: pushing; 300 machines: 7 failed, 150 pushing, 143 converged\n")
	assert.Contains(t, during, "  - m007=failed m017=failed m027=failed m037=failed m047=failed and 2 more (`starter plan show "+
		testPlanID+" --machines failed,refused,reverting,reverted` lists them)\n", "the machines that need a person, the first few named")
	assert.Contains(t, currentDetails(t, h.env), "- tier 1: halted; 300 machines: 7 failed, 293 converged\n")

	// What following the plan polls: the tier as its counts and the first
	// machines to look at, not a row per machine.
	require.Len(t, whole.Tiers[0].Machines, n)
	assert.Equal(t, whole.Summarised(), summary)
	assert.Equal(t, "300 machines: 7 failed, 150 pushing, 143 converged", summary.Tiers[0].CountWords())
	assert.Len(t, summary.Tiers[0].Machines, meshapi.SummaryNames)
}
