package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/parallel"
)

// fanOut bounds how many machines one activity works on at once (composing
// reads their hosts, handing out signals their workflows): enough to hide
// round trips, few enough not to swamp a host or the frontend.
const fanOut = 16

// HandPushes gives each of a tier's push requests to its machine workflow
// by signal-with-start, fanOut at a time, starting a machine
// workflow on first use. Requests are signals, not updates, so fifty plans
// waiting on one machine are never refused by the server's in-flight update
// limit. The plan runs it as a local activity for a few machines, its
// input (their declarations) then out of the plan's history, and as regular
// activities of at most a hundred for more, so that the plan's workflow task
// is not held open while answers arrive (see the workflows package's
// handLocally). A retry signals again: a machine workflow drops a request
// it is waiting on or pushing, and answers one it has answered again.
func (a *Activities) HandPushes(ctx context.Context, in meshapi.HandPushesInput) (meshapi.HandPushesResult, error) {
	queue := activity.GetInfo(ctx).TaskQueue
	if err := parallel.Each(len(in.Requests), fanOut, func(i int) error {
		return a.handPush(ctx, queue, in.Requests[i])
	}); err != nil {
		return meshapi.HandPushesResult{}, err
	}
	return meshapi.HandPushesResult{Enqueued: len(in.Requests)}, nil
}

// handPush gives r to its machine workflow by signal-with-start on queue,
// starting the workflow if it is not running. Signalled again, a request is
// dropped by the machine workflow as a duplicate. The request carries the
// worker's push.local_activity: the machine workflow pushes it as that
// says, whether it starts now or has run for months; and its
// push.max_unavailable, which the machine workflow leases a place in
// before it sends; and that its answer may go in a bundle, which this
// build's plan and relays take (the plan is pinned to the handing build
// under Worker Versioning, where its pushes may run on a later one).
func (a *Activities) handPush(ctx context.Context, queue string, r meshapi.PushRequest) error {
	r.HandedAt = time.Now().UTC() // handed now, when the plan hands it
	r.Local = a.Mesh.Current().Push.LocalActivity
	r.Budget = a.fleetBudget()
	r.Bundles = true // this build's plans and relays take answers in bundles
	_, err := a.Temporal.SignalWithStartWorkflow(ctx, meshapi.MachineID(r.Machine), meshapi.SignalPush, r,
		client.StartWorkflowOptions{
			ID:        meshapi.MachineID(r.Machine),
			TaskQueue: queue,
			// A machine workflow that was terminated is started afresh; it
			// takes its sequence from the host's report.
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:         a.machineSummary(r.Machine),
			// The change time too, so that a workflow started here
			// publishes its first summary without setting it again.
			TypedSearchAttributes: temporal.NewSearchAttributes(meshapi.SAMachine.ValueSet(r.Machine), meshapi.SAMachineChanged.ValueSet(r.HandedAt)),
		},
		meshapi.MachineWorkflowType, meshapi.MachineInput{Machine: r.Machine})
	if err != nil {
		return fmt.Errorf("hand push for %s to its machine workflow: %w", r.Machine, err)
	}
	return nil
}

// machineSummary is what the Web UI shows for a machine workflow: the
// machine, its tier and the modules it runs.
func (a *Activities) machineSummary(machine string) string {
	m, ok := a.Mesh.Current().Machines[machine]
	if !ok {
		return "machine " + machine
	}
	return fmt.Sprintf("machine %s (tier %d: %s)", machine, m.Tier, strings.Join(m.Modules, ", "))
}
