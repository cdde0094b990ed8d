package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// An enrollment is pending from its ask, takes a new host while pending,
// is admitted and turned away by people (each decision once, with who),
// keeps its host once decided, and publishes each state to its search
// attribute.
func TestEnrollmentPendingAdmittedDenied(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Enrollment, workflow.RegisterOptions{Name: meshapi.EnrollmentWorkflowType})
	var published []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa, _ := args.Get(0).(temporal.SearchAttributes)
		state, _ := sa.GetKeyword(meshapi.SAEnrollment)
		published = append(published, state)
	}).Return(nil)

	ask := meshapi.EnrollAsk{Machine: "edge-9", Host: "http://127.0.0.1:7409", Labels: map[string]string{"site": "fra1"}, At: time.Unix(0, 0).UTC()}
	state := func() meshapi.Enrollment {
		t.Helper()
		v, err := env.QueryWorkflow(meshapi.QueryState)
		require.NoError(t, err)
		var st meshapi.Enrollment
		require.NoError(t, v.Get(&st))
		return st
	}
	moved := ask
	moved.Host = "http://127.0.0.1:7410"
	var steps []*updateResult
	update := func(name string, d meshapi.EnrollDecision) {
		r := &updateResult{}
		steps = append(steps, r)
		env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { r.done, r.err = true, err },
			OnComplete: func(_ interface{}, err error) { r.done, r.err = true, err },
		}, d)
	}
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, meshapi.EnrollPending, state().State)
		env.SignalWorkflow(meshapi.SignalEnrollAsk, moved)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, moved.Host, state().Ask.Host, "a pending ask takes the new host")
		update(meshapi.UpdateEnrollApprove, meshapi.EnrollDecision{}) // no one
		update(meshapi.UpdateEnrollApprove, meshapi.EnrollDecision{By: "alice"})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		st := state()
		assert.Equal(t, meshapi.EnrollAdmitted, st.State)
		assert.Equal(t, "alice", st.Decided.By)
		update(meshapi.UpdateEnrollApprove, meshapi.EnrollDecision{By: "bob"}) // again
		env.SignalWorkflow(meshapi.SignalEnrollAsk, ask)
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, moved.Host, state().Ask.Host, "an admitted machine keeps the host it was admitted with")
		update(meshapi.UpdateEnrollDeny, meshapi.EnrollDecision{By: "bob", Reason: "retired"})
	}, 4*time.Second)
	env.RegisterDelayedCallback(func() {
		st := state()
		assert.Equal(t, meshapi.EnrollDenied, st.State)
		assert.Equal(t, "retired", st.Decided.Reason)
		env.CancelWorkflow()
	}, 5*time.Second)
	env.ExecuteWorkflow(meshapi.EnrollmentWorkflowType, meshapi.Enrollment{Ask: ask})

	require.True(t, env.IsWorkflowCompleted())
	require.Len(t, steps, 4)
	steps[0].rejected(t, meshapi.ErrInvalidInput)
	steps[1].ok(t)
	steps[2].rejected(t, meshapi.ErrEnrollDecided)
	assert.Contains(t, steps[2].err.Error(), "machine edge-9 is already admitted (by alice at")
	steps[3].ok(t)
	assert.Equal(t, []string{meshapi.EnrollPending, meshapi.EnrollPending, meshapi.EnrollAdmitted, meshapi.EnrollDenied}, published)
}
