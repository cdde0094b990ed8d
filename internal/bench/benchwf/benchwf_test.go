package benchwf

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
)

func TestWindowedKeepsAtMostSizePending(t *testing.T) {
	for _, tc := range []struct{ n, size int }{{0, 3}, {2, 3}, {3, 3}, {10, 3}, {2500, MaxPending}} {
		started, waited := make([]bool, tc.n), make([]bool, tc.n)
		pending, most := 0, 0
		err := windowed(tc.n, tc.size,
			func(i int) {
				started[i] = true
				pending++
				most = max(most, pending)
			},
			func(i int) error {
				require.True(t, started[i], "waited for %d before starting it", i)
				require.False(t, waited[i], "waited for %d twice", i)
				waited[i] = true
				pending--
				return nil
			})
		require.NoError(t, err)
		assert.LessOrEqual(t, most, tc.size, "n=%d", tc.n)
		assert.Equal(t, min(tc.n, tc.size), most, "n=%d: the window is used to its size", tc.n)
		assert.NotContains(t, waited, false, "n=%d: every one waited for", tc.n)
	}
}

func TestWindowedStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	starts := 0
	err := windowed(10, 3, func(int) { starts++ }, func(i int) error {
		if i == 1 {
			return boom
		}
		return nil
	})
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, 4, starts, "nothing is started after the failed wait")
}

// A Holder runs one activity per request and ends after its last: the
// spread ceiling's rounds are its two requests.
func TestHolderRunsAnActivityPerRequest(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var a *Activities
	env.RegisterActivity(a)
	runs := 0
	env.OnActivity(a.Noop, mock.Anything).Return(func(context.Context) error { runs++; return nil })
	for k := range 2 {
		env.RegisterDelayedCallback(func() {
			assert.Equal(t, k, runs, "no activity before its request")
			env.SignalWorkflow(SignalWork, nil)
		}, time.Duration(k+1)*time.Minute)
	}
	env.ExecuteWorkflow(Holder, HolderInput{Requests: 2})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 2, runs)
}
