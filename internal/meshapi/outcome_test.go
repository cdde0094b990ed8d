package meshapi

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// A plan's failure crosses the wire as a Temporal failure; PlanOutcome reads
// the state back from it, and leaves every other error as it is.
func TestPlanOutcome(t *testing.T) {
	wire := func(err error) error {
		fc := temporal.GetDefaultFailureConverter()
		return fc.FailureToError(fc.ErrorToFailure(err))
	}
	halted := PlanState{Plan: "plan/host/1", State: PlanHalted, Reason: "edge-1 unreachable"}
	cases := []struct {
		name    string
		err     error
		want    PlanStatus
		wantErr bool
	}{
		{"no error", nil, "", false},
		{"halted", wire(PlanFailure(halted)), PlanHalted, false},
		{"refused", wire(PlanFailure(PlanState{State: PlanRefused, Reason: "unknown module"})), PlanRefused, false},
		{"aborted", wire(PlanFailure(PlanState{State: PlanAborted, Reason: "by alice"})), PlanAborted, false},
		{"another application error", wire(temporal.NewApplicationError("boom", "Other", halted)), "", true},
		{"a plan type without a failed state", wire(temporal.NewApplicationError("x", ErrorPlanHalted, PlanState{State: PlanConverged})), "", true},
		{"terminated", errors.New("workflow execution terminated"), "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st PlanState
			err := PlanOutcome(tc.err, &st)
			if tc.wantErr {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, st.State)
		})
	}
	var st PlanState
	require.NoError(t, PlanOutcome(wire(PlanFailure(halted)), &st))
	assert.Equal(t, halted, st, "the whole state comes back")
}

func TestOnlyFailedEndingsFail(t *testing.T) {
	for _, s := range []PlanStatus{PlanBuilding, PlanComposing, PlanPushing, PlanGated, PlanPaused, PlanHeld, PlanConverged, PlanSuperseded} {
		assert.False(t, s.Fails(), s)
	}
	for _, s := range []PlanStatus{PlanHalted, PlanRefused, PlanAborted} {
		assert.True(t, s.Fails(), s)
		assert.True(t, s.Terminal(), s)
	}
}
