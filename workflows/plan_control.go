package workflows

import (
	"cmp"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// setControls registers the operator's updates, each with a validator that
// refuses it (before it reaches the history) when it cannot apply.
func (p *plan) setControls(ctx workflow.Context) error {
	handlers := []struct {
		name string
		fn   any
		val  any
	}{
		{meshapi.UpdateApprove, p.approve, p.validateApprove},
		{meshapi.UpdatePause, p.pause, p.validatePause},
		{meshapi.UpdateResume, p.resume, p.validateResume},
		{meshapi.UpdateAbort, p.abort, p.validateAbort},
	}
	for _, h := range handlers {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.fn, workflow.UpdateHandlerOptions{Validator: h.val}); err != nil {
			return err
		}
	}
	return nil
}

// finished refuses a control once the plan has ended.
func (p *plan) finished() error {
	if p.st.State.Terminal() {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("plan %s already ended %s", p.st.Plan, p.st.State), meshapi.ErrPlanFinished, nil)
	}
	return nil
}

func (p *plan) validateApprove(in meshapi.ApproveInput) error {
	if err := p.finished(); err != nil {
		return err
	}
	if p.analysisGate >= 0 && (in.Tier == nil || *in.Tier == p.analysisGate) {
		return nil // passes the inconclusive analysis the plan waits on
	}
	if in.Tier == nil {
		if p.gate < 0 {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("plan %s is not waiting at a gate (gates: %v); name a tier to approve ahead", p.st.Plan, p.in.Gates),
				meshapi.ErrNotGated, nil)
		}
		return nil
	}
	if !slices.Contains(p.in.Gates, *in.Tier) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("plan %s has no gate before tier %d (gates: %v)", p.st.Plan, *in.Tier, p.in.Gates), meshapi.ErrNotGated, nil)
	}
	return nil
}

func (p *plan) approve(ctx workflow.Context, in meshapi.ApproveInput) (meshapi.ControlResult, error) {
	if p.analysisGate >= 0 && (in.Tier == nil || *in.Tier == p.analysisGate) {
		p.analysisPassedBy = meshapi.Who(cmp.Or(in.By, "someone who did not say"), in.Client)
		workflow.GetLogger(ctx).Info("inconclusive analysis approved", "tier", p.analysisGate, "by", in.By, "client", in.Client)
		return meshapi.ControlResult{State: p.st.State}, nil
	}
	t := p.gate
	if in.Tier != nil {
		t = *in.Tier
	}
	p.approved[t] = true
	workflow.GetLogger(ctx).Info("gate approved", "tier", t, "by", in.By, "client", in.Client)
	return meshapi.ControlResult{State: p.st.State}, nil
}

func (p *plan) validatePause(meshapi.PauseInput) error   { return p.finished() }
func (p *plan) validateResume(meshapi.ResumeInput) error { return p.finished() }
func (p *plan) validateAbort(meshapi.AbortInput) error   { return p.finished() }

func (p *plan) pause(ctx workflow.Context, in meshapi.PauseInput) (meshapi.ControlResult, error) {
	p.st.Paused = true
	workflow.GetLogger(ctx).Info("plan paused", "by", in.By, "client", in.Client, "reason", in.Reason)
	return meshapi.ControlResult{State: p.st.State}, nil
}

func (p *plan) resume(ctx workflow.Context, in meshapi.ResumeInput) (meshapi.ControlResult, error) {
	p.st.Paused = false
	workflow.GetLogger(ctx).Info("plan resumed", "by", in.By, "client", in.Client)
	return meshapi.ControlResult{State: p.st.State}, nil
}

// abort marks the plan aborted and cancels the step in progress; the flow
// then ends it (see interrupted), withdrawing its queued pushes.
func (p *plan) abort(ctx workflow.Context, in meshapi.AbortInput) (meshapi.ControlResult, error) {
	p.aborted = true
	p.abortReason = "aborted"
	if in.By != "" {
		p.abortReason += " by " + meshapi.Who(in.By, in.Client)
	}
	if in.Reason != "" {
		p.abortReason += ": " + in.Reason
	}
	if p.cancelStep != nil {
		p.cancelStep()
	}
	workflow.GetLogger(ctx).Info("plan aborted", "by", in.By, "client", in.Client, "reason", in.Reason)
	return meshapi.ControlResult{State: p.st.State}, nil
}

// step runs fn with a context an abort cancels.
func (p *plan) step(ctx workflow.Context, fn func(workflow.Context) error) error {
	sctx, cancel := workflow.WithCancel(ctx)
	p.cancelStep = cancel
	defer func() { p.cancelStep = nil }()
	return fn(sctx)
}
