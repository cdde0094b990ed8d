package cli

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/meshroll/meshroll/internal/meshapi"
)

func TestWithBudgetWaits(t *testing.T) {
	const plan, words = "plan/host/c", "waiting for the fleet budget: 1 of 1 unavailable (edge-3 pushing web)"
	waiting := meshapi.MachineState{BudgetWait: words, Current: &meshapi.QueuedRequest{Plan: plan}}
	for _, tc := range []struct {
		name  string
		state meshapi.MachineProgress
		asked meshapi.MachineState
		err   error
		want  string
	}{
		{"a push waiting for the budget says so", meshapi.MachineProgress{State: meshapi.MachinePushing}, waiting, nil, words},
		{"a push under way says nothing more", meshapi.MachineProgress{State: meshapi.MachinePushing},
			meshapi.MachineState{Current: &meshapi.QueuedRequest{Plan: plan}}, nil, ""},
		{"another plan's push waiting is not this plan's", meshapi.MachineProgress{State: meshapi.MachinePushing},
			meshapi.MachineState{BudgetWait: words, Current: &meshapi.QueuedRequest{Plan: "plan/web/d"}}, nil, ""},
		{"a machine not pushing is not asked", meshapi.MachineProgress{State: meshapi.MachineConverged}, waiting, nil, ""},
		{"a machine that cannot be asked keeps its words", meshapi.MachineProgress{State: meshapi.MachinePushing}, waiting, errors.New("timeout"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.state
			m.Machine = "edge-1"
			st := meshapi.PlanState{Plan: plan, Tiers: []meshapi.TierState{{Tier: 1, Machines: []meshapi.MachineProgress{m}}}}
			withBudgetWaits(context.Background(), st, func(_ context.Context, machine string) (meshapi.MachineState, error) {
				if tc.state.State != meshapi.MachinePushing {
					t.Errorf("asked %s, a machine not pushing", machine)
				}
				return tc.asked, tc.err
			})
			assert.Equal(t, tc.want, st.Tiers[0].Machines[0].Reason)
		})
	}
}
