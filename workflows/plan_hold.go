package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// takeHoldLifted counts hold-lifted signals, so that a held plan wakes when
// one arrives; a plan that is not held only counts them.
func (p *plan) takeHoldLifted(ctx workflow.Context, sig *planSignals) {
	onSignal(ctx, sig, meshapi.SignalHoldLifted, func(m meshapi.HoldLifted) {
		p.liftedSignals++
		workflow.GetLogger(ctx).Info("hold lifted", "by", m.By, "scope", m.Scope)
	})
}

// holdBefore checks, before a batch of tier is pushed, whether a freeze or
// the deployment windows hold the plan, and while they do it waits: for a
// hold-lifted signal when frozen (an unfreeze sends it), and also for a
// durable timer until the window opens when outside one, then checks
// again. Nothing polls. A push in flight is not touched: the check runs
// only between batches. The plan's state is held meanwhile, its reason the
// hold's words; an abort or a cancellation ends it as anywhere else.
func (p *plan) holdBefore(ctx workflow.Context, tier *meshapi.TierState, batch []int, first bool) error {
	in := meshapi.HoldsInput{
		Module:         p.in.Module,
		Rollback:       p.in.Rollback != nil,
		OverrideFreeze: p.in.OverrideFreeze != nil,
	}
	for _, mi := range batch {
		in.Machines = append(in.Machines, tier.Machines[mi].Machine)
	}
	held := false
	for {
		if p.aborted {
			return p.endAborted(ctx)
		}
		seen := p.liftedSignals
		var hr meshapi.HoldsResult
		err := p.step(ctx, func(sctx workflow.Context) error {
			return workflow.ExecuteLocalActivity(holdsOptions(sctx), acts.Holds, in).Get(sctx, &hr)
		})
		if err := p.interrupted(ctx, err, "could not check freezes and deployment windows: "); err != nil {
			return err
		}
		if hr.Why == "" {
			if held {
				p.st.State, p.st.Reason = meshapi.PlanPushing, ""
				if first {
					tier.State = meshapi.TierPushing
				}
				workflow.GetLogger(ctx).Info("hold over", "tier", tier.Tier)
			}
			return nil
		}
		held = true
		p.st.State, p.st.Reason = meshapi.PlanHeld, hr.Why
		if first {
			tier.State = meshapi.TierWaiting
		}
		p.details(ctx, fmt.Sprintf("%s (before tier %d)", hr.Why, tier.Tier))
		wake := func() bool { return p.aborted || p.liftedSignals != seen }
		if hr.WindowOpensAt == nil {
			err = workflow.Await(ctx, wake)
		} else {
			// At least a second, so that a worker clock a little ahead of
			// the workflow's never makes the plan spin.
			d := max(hr.WindowOpensAt.Sub(workflow.Now(ctx)), time.Second)
			_, err = workflow.AwaitWithTimeout(ctx, d, wake)
		}
		if err != nil {
			return p.cancelled(ctx, err)
		}
	}
}

// holdsOptions: the check reads the catalogue; a catalogue briefly away is
// retried, a bad windows config is not.
func holdsOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{meshapi.ErrInvalidInput},
		},
	})
}

// overrideWords is what every declaration of the plan carries for the host to
// journal: an operator's override of freezes and windows, if any.
func (p *plan) overrideWords() string {
	if p.in.OverrideFreeze == nil {
		return ""
	}
	return p.in.OverrideFreeze.Words()
}
