package activities

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// AskLease gives a machine workflow's ask for a place to the fleet budget
// by signal-with-start, starting the budget on the first ask of the
// fleet: whoever asks first starts it, and every later ask finds it. The
// machine workflow runs it as a local activity and waits for the answer
// on its own signal channel; a retry signals again, which the budget
// answers with the lease the machine holds or its place in line.
func (a *Activities) AskLease(ctx context.Context, ask meshapi.LeaseAsk) error {
	queue := activity.GetInfo(ctx).TaskQueue
	_, err := a.Temporal.SignalWithStartWorkflow(ctx, meshapi.FleetBudgetID(queue), meshapi.SignalLeaseAsk, ask,
		client.StartWorkflowOptions{
			ID:        meshapi.FleetBudgetID(queue),
			TaskQueue: queue,
			// A budget that was terminated is started afresh: its
			// leases went with it, and machines pushing then release
			// into nothing.
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:         "fleet budget: machines unavailable at once across every plan (push.max_unavailable)",
		},
		meshapi.FleetBudgetWorkflowType, meshapi.FleetBudgetInput{Budget: ask.Budget})
	if err != nil {
		return fmt.Errorf("ask the fleet budget for %s: %w", ask.Machine, err)
	}
	return nil
}

// fleetBudget is the worker's push.max_unavailable as a request carries
// it, nil when it sets none.
func (a *Activities) fleetBudget() *meshapi.FleetBudget {
	cfg := a.Mesh.Current()
	mu := cfg.Push.MaxUnavailable
	if mu.N <= 0 {
		return nil
	}
	return &meshapi.FleetBudget{MaxUnavailable: mu.N, Percent: mu.Percent, FleetSize: len(cfg.Machines)}
}
