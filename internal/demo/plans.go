package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// clearStaleMachines terminates machine workflows of the demo's machines
// left running by an earlier demo: they are bound to that demo's task
// queue, whose worker is gone, so pushes sent to them would never run. Only
// workflows on a demo task queue are touched.
func (r *run) clearStaleMachines(ctx context.Context) error {
	for _, m := range []string{MachineEdge, MachineControl} {
		id := meshapi.MachineID(m)
		desc, err := r.o.Client.DescribeWorkflow(ctx, id, "")
		if err != nil || desc.RawResponse == nil {
			continue // none yet
		}
		d := desc.RawResponse
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		if tq := d.GetExecutionConfig().GetTaskQueue().GetName(); !strings.HasPrefix(tq, TaskQueuePrefix) {
			return fmt.Errorf("machine workflow %s runs on task queue %q, not a demo's; the demo will not take it over", id, tq)
		}
		if err := r.o.Client.TerminateWorkflow(ctx, id, "", "left by an earlier starter demo, whose worker is gone"); err != nil {
			return fmt.Errorf("end the earlier demo's %s: %w", id, err)
		}
	}
	return nil
}

// endMachines ends the demo's machine workflows, whose worker is stopping;
// they stay visible in the Web UI.
func (r *run) endMachines() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []string{MachineEdge, MachineControl} {
		_ = r.o.Client.TerminateWorkflow(ctx, meshapi.MachineID(m), "", "starter demo finished; its worker and host agents are stopped")
	}
}

// start starts a plan and records it in the summary.
func (r *run) start(ctx context.Context, module, commit string, gates ...int) (string, error) {
	st, err := plans.Start(ctx, r.o.Client, r.sum.TaskQueue, meshapi.PlanInput{
		Module: module, Commit: commit, Gates: gates, Policy: r.cfg.PushPolicy(),
	})
	if err != nil {
		return "", err
	}
	r.sum.Plans = append(r.sum.Plans, Plan{ID: st.ID, Module: module, Commit: commit})
	gate := ""
	if len(gates) > 0 {
		gate = fmt.Sprintf(" (gate before tier %d)", gates[0])
	}
	r.say("merged %s at %s: started plan %s%s", module, short(commit), st.ID, gate)
	return st.ID, nil
}

// converge follows a plan to its end, narrating its phases, and fails
// unless it converged.
func (r *run) converge(ctx context.Context, id string) (meshapi.PlanState, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var last meshapi.PlanStatus
	st, err := plans.Wait(ctx, r.o.Client, id, 250*time.Millisecond, func(st meshapi.PlanState) {
		if st.State != last && !st.State.Terminal() {
			last = st.State
			r.say("  %s %s", id, st.State)
		}
	})
	if err != nil {
		return st, err
	}
	r.record(st)
	if st.State != meshapi.PlanConverged {
		return st, fmt.Errorf("plan %s ended %s", id, withReason(st.State, st.Reason))
	}
	gen := int64(0)
	if st.Build != nil {
		gen = st.Build.Generation
	}
	r.say("  %s converged: %s generation %d", id, st.Module, gen)
	return st, nil
}

// waitGated follows a plan until it waits at a gate, narrating its
// phases; a plan that ends first fails the demo at once.
func (r *run) waitGated(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var last meshapi.PlanStatus
	st, err := plans.WaitUntil(ctx, r.o.Client, id, "its gate", func(st meshapi.PlanState) bool {
		if st.State != last {
			last = st.State
			r.say("  %s %s", id, st.State)
		}
		return st.State == meshapi.PlanGated
	}, 250*time.Millisecond)
	if err == nil || st.State.Terminal() {
		r.record(st)
	}
	return err
}

// record puts a plan's latest state into the summary.
func (r *run) record(st meshapi.PlanState) {
	for i := range r.sum.Plans {
		p := &r.sum.Plans[i]
		if p.ID != st.Plan {
			continue
		}
		p.State, p.Reason = st.State, st.Reason
		if st.Build != nil {
			p.Digest, p.Generation = st.Build.Digest, st.Build.Generation
		}
	}
}
