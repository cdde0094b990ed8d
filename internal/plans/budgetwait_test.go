package plans

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// stateClient answers the state query of each workflow ID from states; an
// ID it lacks is not found.
type stateClient struct {
	client.Client
	states map[string]any
}

func (c stateClient) QueryWorkflow(_ context.Context, id, _, _ string, _ ...any) (converter.EncodedValue, error) {
	st, ok := c.states[id]
	if !ok {
		return nil, serviceerror.NewNotFound("no workflow " + id)
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(st)
	if err != nil {
		return nil, err
	}
	return encoded{p}, nil
}

// encoded is a query's answer as the SDK hands it over.
type encoded struct{ p *commonpb.Payloads }

func (e encoded) HasValue() bool { return true }
func (e encoded) Get(v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(e.p, v)
}

// A machine waiting for the fleet budget is said to wait where the line
// stands now, not where it stood when its wait began; when the budget
// cannot be asked, or has the push no longer in line, the machine's own
// words stand.
func TestMachineStateTellsTheBudgetLineAsItIsNow(t *testing.T) {
	const budget = "fleet-budget/meshroll"
	then := "waiting for the fleet budget: 1 of 1 unavailable (alpha-1 pushing alpha)"
	machine := meshapi.MachineState{Machine: "beta-1", BudgetWait: then, BudgetWorkflow: budget,
		Current: &meshapi.QueuedRequest{Request: "plan/beta/c1@beta-1"}}
	line := meshapi.FleetBudgetState{Limit: 1,
		Leases: []meshapi.Lease{{LeaseAsk: meshapi.LeaseAsk{Machine: "alpha-1", Module: "alpha"}}},
		Waiting: []meshapi.LeaseAsk{{Machine: "alpha-2", Request: "rollback/alpha@alpha-2", Urgent: true},
			{Machine: "beta-1", Request: "plan/beta/c1@beta-1"}}}
	for _, tc := range []struct {
		name   string
		states map[string]any
		want   string
	}{
		{"a rollback went ahead of it", map[string]any{meshapi.MachineID("beta-1"): machine, budget: line},
			"waiting for the fleet budget: 1 of 1 unavailable (alpha-1 pushing alpha), 1 ahead in line"},
		{"the budget is gone", map[string]any{meshapi.MachineID("beta-1"): machine}, then},
		{"granted meanwhile", map[string]any{meshapi.MachineID("beta-1"): machine, budget: meshapi.FleetBudgetState{Limit: 1}}, then},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := MachineState(context.Background(), stateClient{states: tc.states}, "beta-1")
			require.NoError(t, err)
			assert.Equal(t, tc.want, st.BudgetWait)
		})
	}
}
