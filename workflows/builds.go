package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// RejectBuild records an operator's rejection of a build in the catalogue
// (starter build reject). It pushes nothing: from then on every push
// refuses the build at send time (the guard), wherever it comes from, and
// a composition no longer picks it, while what runs it keeps running. Its
// execution, listed in the Web UI under RejectID, is the rejection's audit
// record: who, which build and why.
func RejectBuild(ctx workflow.Context, in meshapi.RejectInput) (mesh.Rejection, error) {
	return lever[mesh.Rejection](ctx, fmt.Sprintf("reject %s at %s", in.Module, mesh.ShortCommit(in.Commit)), acts.RejectBuild, in)
}

// ListBuilds answers a module's builds with where each runs now (starter
// build list): the catalogue and the hosts are the worker's to ask.
func ListBuilds(ctx workflow.Context, in meshapi.BuildsInput) (meshapi.BuildsResult, error) {
	return lever[meshapi.BuildsResult](ctx, "list builds of "+in.Module, acts.ListBuilds, in)
}

// lever runs a lever's one activity with in, under leverOptions, and
// answers what it returns. An input with a Validate method that finds it
// invalid fails the lever for good, before any activity runs.
func lever[T any](ctx workflow.Context, summary string, activity, in any) (T, error) {
	var out T
	if v, ok := in.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return out, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrInvalidInput, err)
		}
	}
	ctx = leverOptions(ctx, summary)
	err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &out)
	return out, err
}

// leverOptions are a lever's activity options: an operator waits on it, so
// a catalogue or host briefly away is retried for a minute, not a day.
func leverOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
		Summary:                summary,
	})
}
