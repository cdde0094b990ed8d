package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Temporal is the Starter the worker uses: it starts Receive on the
// worker's task queue under meshapi.ReceiveID. A delivery whose workflow
// runs or completed is found, not started again; one whose workflow failed
// (a day of fetches that failed) starts afresh, so that redelivering it
// from the git host's log is how an operator retries it.
type Temporal struct {
	Client    client.Client
	TaskQueue string
}

// Receive starts the delivery's Receive workflow, or finds it.
func (t Temporal) Receive(ctx context.Context, in meshapi.ReceiveInput) (Received, error) {
	id := meshapi.ReceiveID(in.Provider, in.Delivery)
	o := client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                t.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            fmt.Sprintf("%s push of %s to %s", in.Provider, mesh.ShortCommit(in.After), in.Branch),
		StaticDetails: meshapi.DetailList("repository", in.Repository, "branch", in.Branch, "before", in.Before,
			"after", in.After, "modules", strings.Join(in.Modules, ", "), "delivery", in.Delivery),
	}
	_, err := t.Client.ExecuteWorkflow(ctx, o, meshapi.ReceiveWorkflowType, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &already):
		return Received{ID: id, Existing: true}, nil
	case err != nil:
		return Received{}, fmt.Errorf("start %s: %w", id, err)
	}
	return Received{ID: id}, nil
}
