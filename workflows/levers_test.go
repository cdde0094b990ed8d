package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/activities"
	"github.com/meshroll/meshroll/internal/meshapi"
)

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
