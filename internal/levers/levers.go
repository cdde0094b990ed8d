// Package levers is the client side of the operator's levers on builds:
// reject one (it is never sent again) and list a module's builds with where
// each runs. Each runs as a short workflow on the worker, which owns the
// catalogue and the host credentials, so that the starter needs only
// Temporal; the starter CLI and the integration tests both go through here.
package levers

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Reject records that a build must never be sent again and returns the
// rejection the catalogue keeps: the first one, when the build was already
// rejected. It pushes nothing.
func Reject(ctx context.Context, c client.Client, taskQueue string, in meshapi.RejectInput) (mesh.Rejection, error) {
	if err := in.Validate(); err != nil {
		return mesh.Rejection{}, err
	}
	var r mesh.Rejection
	err := execute(ctx, c, client.StartWorkflowOptions{
		ID:            meshapi.RejectID(in.Module, in.Commit),
		TaskQueue:     taskQueue,
		StaticSummary: fmt.Sprintf("reject %s at %s by %s", in.Module, mesh.ShortCommit(in.Commit), in.By),
		StaticDetails: fmt.Sprintf("module: %s\ncommit: %s\nby: %s\nreason: %s", in.Module, in.Commit, in.By, in.Reason),
	}, meshapi.RejectWorkflowType, in, &r)
	if err != nil {
		return mesh.Rejection{}, fmt.Errorf("reject %s at %s: %w", in.Module, in.Commit, err)
	}
	return r, nil
}

// Builds lists a module's builds, newest first, with the machines whose
// hosts report each running and healthy now.
func Builds(ctx context.Context, c client.Client, taskQueue string, in meshapi.BuildsInput) (meshapi.BuildsResult, error) {
	var res meshapi.BuildsResult
	err := execute(ctx, c, client.StartWorkflowOptions{
		ID:            meshapi.BuildsID(in.Module),
		TaskQueue:     taskQueue,
		StaticSummary: "list builds of " + in.Module,
	}, meshapi.BuildsWorkflowType, in, &res)
	if err != nil {
		return meshapi.BuildsResult{}, fmt.Errorf("list builds of %s: %w", in.Module, err)
	}
	return res, nil
}

// execute runs a lever's workflow and waits for its result. A run already
// going under the ID is joined rather than doubled; one that ended is run
// again (each lever is idempotent).
func execute(ctx context.Context, c client.Client, o client.StartWorkflowOptions, workflowType string, in, out any) error {
	o.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	o.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	run, err := c.ExecuteWorkflow(ctx, o, workflowType, in)
	if err != nil {
		return err
	}
	return run.Get(ctx, out)
}
