// Package plans is the client side of the plan workflow: start a plan for a
// merge (or find the one already started), read its state, wait for it to
// get somewhere (WaitUntil) or follow it to its end (Wait), and send it
// approve, pause, resume and abort. The starter CLI, its demo and the
// integration tests all go through it, so what the tests prove is what an
// operator runs.
package plans

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// ErrNotFound is returned for a plan ID the server does not know.
var ErrNotFound = errors.New("plan not found")

// Started says which plan a merge maps to and whether this call started it.
type Started struct {
	ID    string
	RunID string
	// Existing is true when the merge had already started this plan (a
	// re-delivered merge); nothing new was started.
	Existing bool
}

// Start starts the plan for a merge, or finds the one the merge already
// started: the ID is made from module and commit and the server refuses a
// second workflow with it, running or closed.
func Start(ctx context.Context, c client.Client, taskQueue string, in meshapi.PlanInput) (Started, error) {
	if err := in.Validate(); err != nil {
		return Started{}, err
	}
	o := client.StartWorkflowOptions{
		ID:                                       meshapi.PlanID(in.Module, in.Commit),
		TaskQueue:                                taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            fmt.Sprintf("merge of %s at %s", in.Module, mesh.ShortCommit(in.Commit)),
		StaticDetails: meshapi.DetailList("module", in.Module, "commit", in.Commit,
			"gates", fmt.Sprint(in.Gates), "force", fmt.Sprint(in.Force)),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			meshapi.SAModule.ValueSet(in.Module),
			meshapi.SACommit.ValueSet(in.Commit),
			meshapi.SAState.ValueSet(string(meshapi.PlanBuilding)),
		),
	}
	if r := in.Rollback; r != nil {
		// One rollback of a module at a time; a later one is a new run.
		o.ID = meshapi.RollbackID(in.Module)
		// Its workflow tasks, and its activities by inheritance, go before
		// merge plans' where the worker's task queue is backed up.
		o.Priority = temporal.Priority{PriorityKey: meshapi.RollbackPriority}
		o.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		to := r.To
		if to == "" {
			to = "the newest healthy build below what runs"
		}
		o.StaticSummary = fmt.Sprintf("rollback of %s by %s", in.Module, r.By)
		o.StaticDetails = meshapi.DetailList("module", in.Module, "to", to, "by", r.By, "client", r.Client, "reason", r.Reason, "gates", fmt.Sprint(in.Gates))
		o.TypedSearchAttributes = temporal.NewSearchAttributes(
			meshapi.SAModule.ValueSet(in.Module),
			meshapi.SAState.ValueSet(string(meshapi.PlanBuilding)),
		)
	}
	if s := in.Sync; s != nil {
		// One sync of a machine's module at a time; a later one is a new run.
		o.ID = meshapi.SyncID(s.Machine, in.Module)
		o.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		o.StaticSummary = fmt.Sprintf("sync of %s on %s by %s", in.Module, s.Machine, s.By)
		o.StaticDetails = meshapi.DetailList("module", in.Module, "machine", s.Machine, "by", s.By, "client", s.Client)
		o.TypedSearchAttributes = temporal.NewSearchAttributes(
			meshapi.SAModule.ValueSet(in.Module),
			meshapi.SAState.ValueSet(string(meshapi.PlanBuilding)),
		)
	}
	id := o.ID
	run, err := c.ExecuteWorkflow(ctx, o, meshapi.PlanWorkflowType, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return Started{ID: id, RunID: already.RunId, Existing: true}, nil
	}
	if err != nil {
		return Started{}, fmt.Errorf("start plan %s: %w", id, err)
	}
	return Started{ID: id, RunID: run.GetRunID()}, nil
}

// State returns the plan's state: its result if it has ended, else its
// answer to the state query.
func State(ctx context.Context, c client.Client, id string) (meshapi.PlanState, error) {
	return read(ctx, c, id, meshapi.QueryState)
}

// Progress returns the plan's state as following it needs it
// (meshapi.PlanState.Summarised): a running plan's answer to the summary
// query, its large tiers as counts, or, from a plan whose build has no
// such query, its whole state; an ended plan's result, summarised. Polled
// twice a second, it moves a tier's counts rather than a row per machine.
func Progress(ctx context.Context, c client.Client, id string) (meshapi.PlanState, error) {
	st, err := read(ctx, c, id, meshapi.QuerySummary, meshapi.QueryState)
	if err != nil {
		return st, err
	}
	return st.Summarised(), nil
}

// read returns the plan's state: its result if it has ended, else its
// answer to the first of queries it knows (a plan answers "unknown
// queryType" to a query its build does not have).
func read(ctx context.Context, c client.Client, id string, queries ...string) (meshapi.PlanState, error) {
	desc, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return meshapi.PlanState{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return meshapi.PlanState{}, fmt.Errorf("describe plan %s: %w", id, err)
	}
	var st meshapi.PlanState
	if desc.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if err := meshapi.PlanOutcome(c.GetWorkflow(ctx, id, "").Get(ctx, &st), &st); err != nil {
			if errors.As(err, new(*temporal.WorkflowExecutionError)) {
				// The plan's own ending (terminated, timed out, failed
				// without its state): final, unlike a failed read of it.
				return meshapi.PlanState{}, fmt.Errorf("plan %s %w without a result: %w", id, ErrEnded, err)
			}
			return meshapi.PlanState{}, fmt.Errorf("plan %s ended without a result: %w", id, err)
		}
		return st, nil
	}
	var v converter.EncodedValue
	for i, name := range queries {
		if v, err = query(ctx, c, id, name); err == nil || !unknownQuery(err) || i == len(queries)-1 {
			break
		}
	}
	if err != nil {
		return meshapi.PlanState{}, fmt.Errorf("query plan %s: %w", id, err)
	}
	if err := v.Get(&st); err != nil {
		return meshapi.PlanState{}, fmt.Errorf("decode state of plan %s: %w", id, err)
	}
	return st, nil
}

// Wait follows a plan to its end, calling progress whenever its state
// changes (polling the query every interval), and returns the final state.
func Wait(ctx context.Context, c client.Client, id string, interval time.Duration, progress func(meshapi.PlanState)) (meshapi.PlanState, error) {
	done := make(chan error, 1)
	var final meshapi.PlanState
	go func() { done <- meshapi.PlanOutcome(c.GetWorkflow(ctx, id, "").Get(ctx, &final), &final) }()
	t := time.NewTicker(interval)
	defer t.Stop()
	var last string
	report := func(st meshapi.PlanState) {
		if progress == nil {
			return
		}
		if key := fmt.Sprintf("%+v", st); key != last {
			last = key
			progress(st)
		}
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				return meshapi.PlanState{}, fmt.Errorf("wait for plan %s: %w", id, err)
			}
			report(final)
			return final, nil
		case <-t.C:
			if st, err := Progress(ctx, c, id); err == nil {
				report(st)
			}
		case <-ctx.Done():
			return meshapi.PlanState{}, ctx.Err()
		}
	}
}

// Control sends approve, pause, resume or abort and waits for the plan's
// answer; a refusal (no gate waiting, plan already ended) comes back as the
// error.
func Control(ctx context.Context, c client.Client, id, update string, arg any) (meshapi.ControlResult, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   update,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return meshapi.ControlResult{}, fmt.Errorf("%w: %s (or it has ended)", ErrNotFound, id)
		}
		return meshapi.ControlResult{}, fmt.Errorf("%s plan %s: %w", update, id, err)
	}
	var res meshapi.ControlResult
	if err := h.Get(ctx, &res); err != nil {
		return meshapi.ControlResult{}, fmt.Errorf("%s plan %s: %w", update, id, err)
	}
	return res, nil
}
