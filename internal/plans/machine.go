package plans

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
)

// ErrNoMachineWorkflow is returned for a machine whose workflow was never
// started: machine workflows start on a plan's first push to them, so a
// machine no plan has pushed yet has none, and that is not a failure.
var ErrNoMachineWorkflow = errors.New("no machine workflow")

// MachineState asks a machine's workflow for its state: the last sequence
// it sent, the request it is pushing and its queue.
func MachineState(ctx context.Context, c client.Client, machine string) (meshapi.MachineState, error) {
	id := meshapi.MachineID(machine)
	v, err := query(ctx, c, id, meshapi.QueryState)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return meshapi.MachineState{}, fmt.Errorf("%w %s", ErrNoMachineWorkflow, id)
		}
		return meshapi.MachineState{}, fmt.Errorf("query machine workflow %s: %w", id, err)
	}
	var st meshapi.MachineState
	if err := v.Get(&st); err != nil {
		return meshapi.MachineState{}, fmt.Errorf("decode state of machine workflow %s: %w", id, err)
	}
	if st.Queue == nil {
		st.Queue = []meshapi.QueuedRequest{}
	}
	if st.BudgetWait != "" && st.BudgetWorkflow != "" && st.Current != nil {
		if words, ok := budgetWaitNow(ctx, c, st.BudgetWorkflow, st.Current.Request); ok {
			st.BudgetWait = words
		}
	}
	return st, nil
}

// budgetWaitNow says why request waits for the fleet budget as the budget
// (its workflow id) stands now: the machine workflow keeps the words the
// budget sent when the wait began, and the line has moved since. ok is
// false when the budget cannot be asked or no longer holds request in
// line (its grant is on its way): the machine's own words stand then.
func budgetWaitNow(ctx context.Context, c client.Client, id, request string) (string, bool) {
	v, err := query(ctx, c, id, meshapi.QueryState)
	if err != nil {
		return "", false
	}
	var b meshapi.FleetBudgetState
	if v.Get(&b) != nil {
		return "", false
	}
	return b.WaitWords(request)
}

// summaryPageSize is one page of MachineSummaries: the most a visibility
// store hands out at once by default, so that ten thousand machines are ten
// calls.
const summaryPageSize = 1000

// Summaries is what MachineSummaries read of the running machine workflows.
type Summaries struct {
	// ByMachine holds the summary each workflow keeps in its memo.
	ByMachine map[string]meshapi.MachineSummary
	// Unpublished names the machines whose workflow runs without one yet
	// (it has not turned since a worker that publishes it took it over):
	// ask those with MachineState.
	Unpublished map[string]bool
}

// MachineSummaries reads every running machine workflow of the mesh whose
// workers poll taskQueue in namespace, in one paged visibility list: the
// summary each keeps in its memo, as the visibility store last recorded it
// (a moment behind the workflow). A machine absent from both maps has no
// running workflow the store knows of. Another mesh's machine workflows in
// the same namespace (on a task queue of its own) are not read.
func MachineSummaries(ctx context.Context, c client.Client, namespace, taskQueue string) (Summaries, error) {
	return listSummaries(ctx, c, namespace, runningMachines(taskQueue))
}

// MachineSummariesSince reads the running machine workflows that published
// a summary at or after since (meshapi.SAMachineChanged): a reader that
// keeps every summary asks this rather than the whole list on each look.
// A workflow that has published nothing since its worker set the
// attribute is not in it, so such a reader reads the whole list now and
// then too (package machinefeed does).
func MachineSummariesSince(ctx context.Context, c client.Client, namespace, taskQueue string, since time.Time) (Summaries, error) {
	return listSummaries(ctx, c, namespace, runningMachines(taskQueue)+" AND "+meshapi.SAMachineChanged.GetName()+" >= "+quote(since.UTC().Format(time.RFC3339Nano)))
}

// runningMachines is the visibility query of every running machine
// workflow on taskQueue.
func runningMachines(taskQueue string) string {
	return "WorkflowType = " + quote(meshapi.MachineWorkflowType) + " AND ExecutionStatus = 'Running' AND TaskQueue = " + quote(taskQueue)
}

// listSummaries reads the summaries of the machine workflows query lists,
// page after page.
func listSummaries(ctx context.Context, c client.Client, namespace, q string) (Summaries, error) {
	out := Summaries{ByMachine: map[string]meshapi.MachineSummary{}, Unpublished: map[string]bool{}}
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, PageSize: summaryPageSize, NextPageToken: token, Query: q,
		})
		if err != nil {
			return out, fmt.Errorf("list machine workflows (query %s): %w", q, err)
		}
		for _, info := range resp.GetExecutions() {
			machine, ok := meshapi.MachineFromID(info.GetExecution().GetWorkflowId())
			if !ok {
				continue
			}
			var s meshapi.MachineSummary
			p := info.GetMemo().GetFields()[meshapi.MemoMachine]
			if p == nil || payloads.Converter.FromPayload(p, &s) != nil {
				out.Unpublished[machine] = true
				continue
			}
			out.ByMachine[machine] = s
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}
