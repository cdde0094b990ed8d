// Package levers is the client side of the operator's levers on builds:
// reject one (it is never sent again), list a module's builds with where
// each runs, and rebuild a lost catalogue from what the hosts run; and on
// roll-outs: freeze, unfreeze and list freezes. Each runs
// as a short workflow on the worker, which owns the catalogue and the host
// credentials, so that the starter needs only Temporal; the starter CLI and
// the integration tests both go through here.
package levers

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
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
		StaticDetails: meshapi.DetailList("module", in.Module, "commit", in.Commit, "by", in.By, "reason", in.Reason),
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

// Freeze records a freeze: plans of the module, or pushing the machine
// (each "" for every one), hold before their next batch until it is
// lifted. It pushes nothing and stops no push in flight.
func Freeze(ctx context.Context, c client.Client, taskQueue string, in meshapi.FreezeInput) (mesh.Freeze, error) {
	if err := in.Validate(); err != nil {
		return mesh.Freeze{}, err
	}
	scope := mesh.Freeze{Module: in.Module, Machine: in.Machine}.Scope()
	var f mesh.Freeze
	err := execute(ctx, c, client.StartWorkflowOptions{
		ID:            meshapi.FreezeID("freeze", in.Module, in.Machine),
		TaskQueue:     taskQueue,
		StaticSummary: fmt.Sprintf("freeze %s by %s", scope, in.By),
		StaticDetails: meshapi.DetailList("module", in.Module, "machine", in.Machine, "by", in.By, "reason", in.Reason),
	}, meshapi.FreezeWorkflowType, in, &f)
	if err != nil {
		return mesh.Freeze{}, fmt.Errorf("freeze %s: %w", scope, err)
	}
	return f, nil
}

// Unfreeze lifts the freezes of exactly the input's scope, then tells every
// running plan of the mesh (namespace and task queue) by the hold-lifted
// signal, so that a held plan checks again at once; a plan not held ignores
// it. The plans are told even when nothing was lifted, so that running
// unfreeze again is how to re-tell them if this one was cut short.
func Unfreeze(ctx context.Context, c client.Client, namespace, taskQueue string, in meshapi.UnfreezeInput) (meshapi.UnfreezeResult, error) {
	scope := mesh.Freeze{Module: in.Module, Machine: in.Machine}.Scope()
	var res meshapi.UnfreezeResult
	err := execute(ctx, c, client.StartWorkflowOptions{
		ID:            meshapi.FreezeID("unfreeze", in.Module, in.Machine),
		TaskQueue:     taskQueue,
		StaticSummary: fmt.Sprintf("unfreeze %s by %s", scope, in.By),
	}, meshapi.UnfreezeWorkflowType, in, &res)
	if err != nil {
		return meshapi.UnfreezeResult{}, fmt.Errorf("unfreeze %s: %w", scope, err)
	}
	signalled, err := TellPlans(ctx, c, namespace, taskQueue, meshapi.HoldLifted{By: in.By, Scope: scope})
	res.Signalled = signalled
	if err != nil {
		return res, fmt.Errorf("unfreeze %s: lifted %d, but telling the plans: %w", scope, len(res.Lifted), err)
	}
	return res, nil
}

// TellPlans sends the hold-lifted signal to every running plan of the
// mesh and returns those told. A plan that ended meanwhile is skipped.
func TellPlans(ctx context.Context, c client.Client, namespace, taskQueue string, m meshapi.HoldLifted) ([]string, error) {
	running, err := plans.List(ctx, c, namespace, plans.ListFilter{TaskQueue: taskQueue, Running: true})
	if err != nil {
		return nil, fmt.Errorf("list running plans: %w", err)
	}
	told := []string{}
	for _, p := range running {
		err := c.SignalWorkflow(ctx, p.Plan, p.RunID, meshapi.SignalHoldLifted, m)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			continue
		case err != nil:
			return told, fmt.Errorf("signal %s: %w", p.Plan, err)
		}
		told = append(told, p.Plan)
	}
	return told, nil
}

// Freezes lists the active freezes, oldest first.
func Freezes(ctx context.Context, c client.Client, taskQueue string) (meshapi.FreezesResult, error) {
	var res meshapi.FreezesResult
	err := execute(ctx, c, client.StartWorkflowOptions{
		ID:            meshapi.FreezesID,
		TaskQueue:     taskQueue,
		StaticSummary: "list freezes",
	}, meshapi.FreezesWorkflowType, meshapi.FreezesInput{}, &res)
	if err != nil {
		return meshapi.FreezesResult{}, fmt.Errorf("list freezes: %w", err)
	}
	return res, nil
}

// Rebuild asks the worker to rebuild the catalogue from what the hosts run
// (workflow RebuildCatalogue) and waits for its verdicts. A rebuild
// already under way is joined, not doubled.
func Rebuild(ctx context.Context, c client.Client, taskQueue string, in meshapi.RebuildInput) (meshapi.RebuildResult, error) {
	if err := in.Validate(); err != nil {
		return meshapi.RebuildResult{}, err
	}
	var res meshapi.RebuildResult
	err := execute(ctx, c, client.StartWorkflowOptions{
		ID:            meshapi.RebuildID(),
		TaskQueue:     taskQueue,
		StaticSummary: "rebuild the catalogue from the hosts, by " + in.By,
		StaticDetails: meshapi.DetailList("by", in.By, "reason", in.Reason),
	}, meshapi.RebuildWorkflowType, in, &res)
	if err != nil {
		return meshapi.RebuildResult{}, fmt.Errorf("rebuild the catalogue: %w", err)
	}
	return res, nil
}
