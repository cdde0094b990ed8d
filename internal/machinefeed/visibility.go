package machinefeed

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/plans"
)

// Visibility is the Store of a Temporal namespace's visibility store,
// holding the machine workflows of the mesh whose workers poll TaskQueue.
type Visibility struct {
	Client               client.Client
	Namespace, TaskQueue string
}

// All implements Store.
func (v Visibility) All(ctx context.Context) (plans.Summaries, error) {
	return plans.MachineSummaries(ctx, v.Client, v.Namespace, v.TaskQueue)
}

// Since implements Store.
func (v Visibility) Since(ctx context.Context, t time.Time) (plans.Summaries, error) {
	return plans.MachineSummariesSince(ctx, v.Client, v.Namespace, v.TaskQueue, t)
}
