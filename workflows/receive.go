package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Receive is one delivery of a push event the merge receiver took (package
// webhook): it runs PlanPushedModules, which fetches the clone, finds the
// modules the push touched and starts their plans. The receiver's HTTP
// handler only starts this workflow, under an ID made from the delivery,
// so a git host that re-delivers finds it, and a clone that cannot be
// fetched now is fetched again later, for up to a day, rather than losing
// the merge.
func Receive(ctx workflow.Context, in meshapi.ReceiveInput) (meshapi.ReceiveResult, error) {
	var res meshapi.ReceiveResult
	if err := in.Validate(); err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrInvalidInput, err)
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    10 * time.Minute,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
		Summary:                fmt.Sprintf("fetch %s and plan %s at %s", in.Branch, mesh.ShortCommit(in.After), strings.Join(in.Modules, ", ")),
	})
	err := workflow.ExecuteActivity(ctx, acts.PlanPushedModules, in).Get(ctx, &res)
	return res, err
}
