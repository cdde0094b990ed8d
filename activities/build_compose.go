package activities

import (
	"context"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// BuildAndCompose builds, then composes the plan's targets with the build,
// in one activity, sparing a small plan the workflow task and activity
// task between the two. A build that fails fails it, as Build does; a
// composition that fails transiently does not (the build is done and
// recorded): it is returned for the plan to compose again by
// ComposeTargets, under that activity's retries.
func (a *Activities) BuildAndCompose(ctx context.Context, in meshapi.BuildComposeInput) (meshapi.BuildComposeResult, error) {
	b, err := a.Build(ctx, in.Build)
	if err != nil {
		return meshapi.BuildComposeResult{}, err
	}
	composed, err := a.ComposeTargets(ctx, meshapi.ComposeTargetsInput{Plan: in.Build.Plan, Targets: in.Targets, Build: b})
	if err != nil {
		a.Log.Warn().Err(err).Str("plan", in.Build.Plan).Msg("compose after the build failed; the plan composes again")
		return meshapi.BuildComposeResult{Build: b, ComposeError: err.Error()}, nil
	}
	return meshapi.BuildComposeResult{Build: b, Composed: &composed}, nil
}
