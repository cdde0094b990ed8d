package plans

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// step is what planClient answers for one read of a plan's state.
type step struct {
	st meshapi.PlanState
	// ended makes the plan closed: its state comes from its result.
	ended bool
	// describeErr fails the read's DescribeWorkflow.
	describeErr error
	// resultErr is the closed plan's result error.
	resultErr error
}

// planClient plays a plan through steps, one per read (each read of State
// starts with DescribeWorkflow), staying on the last.
type planClient struct {
	client.Client
	steps []step
	reads int
}

func (p *planClient) cur() step { return p.steps[min(p.reads, len(p.steps))-1] }

func (p *planClient) DescribeWorkflow(context.Context, string, string) (*client.WorkflowExecutionDescription, error) {
	p.reads++
	s := p.cur()
	if s.describeErr != nil {
		return nil, s.describeErr
	}
	status := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if s.ended {
		status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}
	return &client.WorkflowExecutionDescription{WorkflowExecutionMetadata: client.WorkflowExecutionMetadata{Status: status}}, nil
}

func (p *planClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return stateValue(p.cur().st), nil
}

func (p *planClient) GetWorkflow(context.Context, string, string) client.WorkflowRun {
	return result{step: p.cur()}
}

// result is a closed plan's run.
type result struct {
	client.WorkflowRun
	step step
}

func (r result) Get(_ context.Context, v any) error {
	if r.step.resultErr != nil {
		return r.step.resultErr
	}
	*v.(*meshapi.PlanState) = r.step.st
	return nil
}

// stateValue is a query's answer.
type stateValue meshapi.PlanState

func (s stateValue) HasValue() bool { return true }
func (s stateValue) Get(v any) error {
	*v.(*meshapi.PlanState) = meshapi.PlanState(s)
	return nil
}

func plan(state meshapi.PlanStatus, reason string) meshapi.PlanState {
	return meshapi.PlanState{Plan: "plan/host/c0ffee", State: state, Reason: reason}
}

func gated(st meshapi.PlanState) bool { return st.State == meshapi.PlanGated }

func TestWaitUntil(t *testing.T) {
	unavailable := serviceerror.NewUnavailable("frontend restarting")
	cases := []struct {
		name  string
		steps []step
		ok    func(meshapi.PlanState) bool
		// wantState is the state returned; wantReads how many reads it
		// took (the wait ran out when it is 0).
		wantState meshapi.PlanStatus
		wantReads int
		// wantErr is nil for success, else what the error wraps.
		wantErr error
		// wantWords are in the error.
		wantWords []string
		// wantSaw, if set, is every state ok is shown.
		wantSaw []meshapi.PlanStatus
	}{
		{
			name:      "reaches it",
			steps:     []step{{st: plan(meshapi.PlanBuilding, "")}, {st: plan(meshapi.PlanPushing, "")}, {st: plan(meshapi.PlanGated, "")}},
			ok:        gated,
			wantState: meshapi.PlanGated, wantReads: 3,
			wantSaw: []meshapi.PlanStatus{meshapi.PlanBuilding, meshapi.PlanPushing, meshapi.PlanGated},
		},
		{
			name:      "an end ok accepts is reached",
			steps:     []step{{st: plan(meshapi.PlanPushing, "")}, {st: plan(meshapi.PlanConverged, ""), ended: true}},
			ok:        func(st meshapi.PlanState) bool { return st.State == meshapi.PlanConverged },
			wantState: meshapi.PlanConverged, wantReads: 2,
		},
		{
			name:      "failed reads are read again",
			steps:     []step{{describeErr: unavailable}, {describeErr: unavailable}, {st: plan(meshapi.PlanGated, "")}},
			ok:        gated,
			wantState: meshapi.PlanGated, wantReads: 3,
		},
		{
			name:      "ended short of it: at once, with state and reason",
			steps:     []step{{st: plan(meshapi.PlanPushing, "")}, {st: plan(meshapi.PlanHalted, "tier 1 failed: edge-1 unreachable"), ended: true}},
			ok:        gated,
			wantState: meshapi.PlanHalted, wantReads: 2,
			wantErr:   ErrEnded,
			wantWords: []string{"plan/host/c0ffee", "ended halted (tier 1 failed: edge-1 unreachable) before its gate"},
		},
		{
			name:      "ended without a state: at once",
			steps:     []step{{st: plan(meshapi.PlanPushing, "")}, {ended: true, resultErr: &temporal.WorkflowExecutionError{}}},
			ok:        gated,
			wantState: meshapi.PlanPushing, wantReads: 2,
			wantErr:   ErrEnded,
			wantWords: []string{"plan/host/c0ffee", "its gate", "ended without a result"},
		},
		{
			name:      "a failed read of an ended plan's result is read again",
			steps:     []step{{ended: true, resultErr: unavailable}, {st: plan(meshapi.PlanConverged, ""), ended: true}},
			ok:        func(st meshapi.PlanState) bool { return st.State == meshapi.PlanConverged },
			wantState: meshapi.PlanConverged, wantReads: 2,
		},
		{
			name:      "no such plan: at once",
			steps:     []step{{describeErr: serviceerror.NewNotFound("workflow not found")}},
			ok:        gated,
			wantReads: 1,
			wantErr:   ErrNotFound,
			wantWords: []string{"plan/host/c0ffee", "its gate"},
		},
		{
			name:      "never gets there: the context ends the wait",
			steps:     []step{{st: plan(meshapi.PlanHeld, "frozen by ops")}},
			ok:        gated,
			wantState: meshapi.PlanHeld,
			wantErr:   context.DeadlineExceeded,
			wantWords: []string{"plan/host/c0ffee did not reach its gate: last seen held (frozen by ops)"},
		},
		{
			name:      "never read: the context ends the wait, naming the last failure",
			steps:     []step{{describeErr: unavailable}},
			ok:        gated,
			wantErr:   unavailable,
			wantWords: []string{"plan/host/c0ffee did not reach its gate: its state was never read; last read:", "frontend restarting", "deadline exceeded"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pc := &planClient{steps: tc.steps}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var saw []meshapi.PlanStatus
			st, err := WaitUntil(ctx, pc, "plan/host/c0ffee", "its gate", func(st meshapi.PlanState) bool {
				saw = append(saw, st.State)
				return tc.ok(st)
			}, time.Millisecond)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantReads > 0 && ctx.Err() != nil {
				t.Errorf("waited out the context for a plan that could not get there: %v", err)
			}
			for _, w := range tc.wantWords {
				if !strings.Contains(fmt.Sprint(err), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if st.State != tc.wantState {
				t.Errorf("state = %q, want %q", st.State, tc.wantState)
			}
			if tc.wantReads > 0 && pc.reads != tc.wantReads {
				t.Errorf("%d reads, want %d", pc.reads, tc.wantReads)
			}
			if tc.wantSaw != nil && !slices.Equal(saw, tc.wantSaw) {
				t.Errorf("ok saw %v, want every state read in order: %v", saw, tc.wantSaw)
			}
		})
	}
}
