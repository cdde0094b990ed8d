package enroll

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
)

// Temporal keeps enrollments as Enrollment workflows (meshapi), one per
// machine, on the worker's task queue: the Records the worker's endpoint
// uses, and what the worker and the starter list and decide through.
type Temporal struct {
	Client    client.Client
	Namespace string
	TaskQueue string
}

// In is the Enrollment workflows of cfg's namespace, on its task queue.
func In(c client.Client, cfg *config.Config) Temporal {
	return Temporal{Client: c, Namespace: cfg.Temporal.Namespace, TaskQueue: cfg.Temporal.TaskQueue}
}

// Get asks machine's Enrollment workflow for its state.
func (t Temporal) Get(ctx context.Context, machine string) (meshapi.Enrollment, bool, error) {
	var e meshapi.Enrollment
	v, err := t.Client.QueryWorkflow(ctx, meshapi.EnrollmentID(machine), "", meshapi.QueryState)
	var gone *serviceerror.NotFound
	switch {
	case errors.As(err, &gone):
		return e, false, nil
	case err != nil:
		return e, false, fmt.Errorf("query %s: %w", meshapi.EnrollmentID(machine), err)
	}
	if err := v.Get(&e); err != nil {
		return e, false, fmt.Errorf("query %s: %w", meshapi.EnrollmentID(machine), err)
	}
	return e, true, nil
}

// Ask signals the ask to machine's Enrollment workflow, starting it,
// pending, if it does not run.
func (t Temporal) Ask(ctx context.Context, ask meshapi.EnrollAsk) error {
	id := meshapi.EnrollmentID(ask.Machine)
	o := client.StartWorkflowOptions{
		ID:            id,
		TaskQueue:     t.TaskQueue,
		StaticSummary: "enrollment of machine " + ask.Machine,
		StaticDetails: meshapi.DetailList("machine", ask.Machine, "host", ask.Host, "labels", config.LabelString(ask.Labels)),
	}
	_, err := t.Client.SignalWithStartWorkflow(ctx, id, meshapi.SignalEnrollAsk, ask, o, meshapi.EnrollmentWorkflowType, meshapi.Enrollment{Ask: ask})
	if err != nil {
		return fmt.Errorf("signal-with-start %s: %w", id, err)
	}
	return nil
}

// ErrNoEnrollment is returned by Decide for a machine no agent asked
// under.
var ErrNoEnrollment = errors.New("no enrollment")

// Decide admits (meshapi.UpdateEnrollApprove) or turns away
// (UpdateEnrollDeny) machine, and answers its enrollment after.
func (t Temporal) Decide(ctx context.Context, machine, update string, d meshapi.EnrollDecision) (meshapi.Enrollment, error) {
	var e meshapi.Enrollment
	h, err := t.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: meshapi.EnrollmentID(machine), UpdateName: update, Args: []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		return e, fmt.Errorf("machine %s: %w: no agent asked to enroll under that name", machine, ErrNoEnrollment)
	}
	if err == nil {
		err = h.Get(ctx, &e)
	}
	return e, err
}

// List is every running enrollment in state (meshapi.EnrollPending,
// EnrollAdmitted, EnrollDenied), by machine name, as the visibility store
// last recorded them (a moment behind the workflows).
func (t Temporal) List(ctx context.Context, state string) ([]meshapi.Enrollment, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'",
		meshapi.EnrollmentWorkflowType, meshapi.SAEnrollment.GetName(), state)
	var out []meshapi.Enrollment
	var token []byte
	for {
		resp, err := t.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: t.Namespace, PageSize: 1000, NextPageToken: token, Query: q,
		})
		if err != nil {
			return nil, fmt.Errorf("list enrollments (query %s): %w", q, err)
		}
		for _, info := range resp.GetExecutions() {
			var e meshapi.Enrollment
			p := info.GetMemo().GetFields()[meshapi.MemoEnrollment]
			if p == nil || payloads.Converter.FromPayload(p, &e) != nil || e.State != state {
				continue
			}
			out = append(out, e)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ask.Machine < out[j].Ask.Machine })
	return out, nil
}

// Admitted is every admitted machine as the mesh config takes it
// (Config.Admit): the worker's live config and the starter both read the
// fleet through it, so that they agree.
func (t Temporal) Admitted(ctx context.Context) ([]config.Admitted, error) {
	es, err := t.List(ctx, meshapi.EnrollAdmitted)
	if err != nil {
		return nil, err
	}
	out := make([]config.Admitted, 0, len(es))
	for _, e := range es {
		out = append(out, config.Admitted{Name: e.Ask.Machine, Host: e.Ask.Host, Labels: e.Ask.Labels})
	}
	return out, nil
}
