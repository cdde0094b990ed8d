package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Plan is one merge's roll-out: build, compose, then push tier by tier. It
// always completes with a PlanState whose State says how it ended, in words a
// person on call can act on; it fails only if the workflow itself is
// cancelled.
func Plan(ctx workflow.Context, in meshapi.PlanInput) (meshapi.PlanState, error) {
	p := &plan{
		in:       in,
		policy:   in.Policy.WithDefaults(),
		approved: map[int]bool{},
		gate:     -1,
		st: meshapi.PlanState{
			Plan:   workflow.GetInfo(ctx).WorkflowExecution.ID,
			Module: in.Module,
			Commit: in.Commit,
			State:  meshapi.PlanBuilding,
			Gates:  in.Gates,
			Tiers:  []meshapi.TierState{},
		},
	}
	if err := p.setup(ctx); err != nil {
		return p.st, err
	}
	return p.run(ctx)
}

type plan struct {
	in     meshapi.PlanInput
	policy meshapi.PushPolicy
	st     meshapi.PlanState

	approved    map[int]bool
	gate        int // the tier waiting at its gate now, or -1
	aborted     bool
	abortReason string
	cancelStep  workflow.CancelFunc

	// ctx is the workflow's root context, for publishing search attributes
	// from wherever the state changes.
	ctx workflow.Context
	// searchAttributes is set for plans started by code that keeps the
	// MeshrollState and MeshrollMachines search attributes current (the
	// "search-attributes" version); published is the state last upserted.
	searchAttributes bool
	published        string
}

func (p *plan) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, meshapi.QueryState, func() (meshapi.PlanState, error) {
		return p.st, nil
	}); err != nil {
		return err
	}
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
	results := workflow.GetSignalChannel(ctx, meshapi.SignalPushResult)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var r meshapi.PushResult
			if !results.Receive(gctx, &r) {
				return
			}
			p.take(r)
		}
	})
	return nil
}

func (p *plan) finished() error {
	if meshapi.PlanTerminal(p.st.State) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("plan %s already ended %s", p.st.Plan, p.st.State), meshapi.ErrPlanFinished, nil)
	}
	return nil
}

func (p *plan) validateApprove(in meshapi.ApproveInput) error {
	if err := p.finished(); err != nil {
		return err
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
	t := p.gate
	if in.Tier != nil {
		t = *in.Tier
	}
	p.approved[t] = true
	workflow.GetLogger(ctx).Info("gate approved", "tier", t, "by", in.By)
	return meshapi.ControlResult{State: p.st.State}, nil
}

func (p *plan) validatePause(meshapi.PauseInput) error   { return p.finished() }
func (p *plan) validateResume(meshapi.ResumeInput) error { return p.finished() }
func (p *plan) validateAbort(meshapi.AbortInput) error   { return p.finished() }

func (p *plan) pause(ctx workflow.Context, in meshapi.PauseInput) (meshapi.ControlResult, error) {
	p.st.Paused = true
	workflow.GetLogger(ctx).Info("plan paused", "by", in.By, "reason", in.Reason)
	return meshapi.ControlResult{State: p.st.State}, nil
}

func (p *plan) resume(ctx workflow.Context, in meshapi.ResumeInput) (meshapi.ControlResult, error) {
	p.st.Paused = false
	workflow.GetLogger(ctx).Info("plan resumed", "by", in.By)
	return meshapi.ControlResult{State: p.st.State}, nil
}

func (p *plan) abort(ctx workflow.Context, in meshapi.AbortInput) (meshapi.ControlResult, error) {
	p.aborted = true
	p.abortReason = "aborted"
	if in.By != "" {
		p.abortReason += " by " + in.By
	}
	if in.Reason != "" {
		p.abortReason += ": " + in.Reason
	}
	if p.cancelStep != nil {
		p.cancelStep()
	}
	workflow.GetLogger(ctx).Info("plan aborted", "by", in.By, "reason", in.Reason)
	return meshapi.ControlResult{State: p.st.State}, nil
}

// take records a machine's answer and shows it in the plan's state at once.
func (p *plan) take(r meshapi.PushResult) {
	for ti := range p.st.Tiers {
		for mi := range p.st.Tiers[ti].Machines {
			m := &p.st.Tiers[ti].Machines[mi]
			if meshapi.RequestID(p.st.Plan, m.Machine) == r.Request && m.State == meshapi.MachinePushing {
				m.State, m.Reason, m.Seq, m.Rebased = r.Outcome, r.Reason, r.Seq, r.Rebased
			}
		}
	}
}

// versionSearchAttributes gates the search attribute upserts: plans that
// started before them replay without.
const versionSearchAttributes = "search-attributes"

func (p *plan) run(ctx workflow.Context) (meshapi.PlanState, error) {
	p.ctx = ctx
	planStarted(ctx, p.in.Module)
	p.searchAttributes = workflow.GetVersion(ctx, versionSearchAttributes, workflow.DefaultVersion, 1) >= 1
	p.published = meshapi.PlanBuilding // set when the plan was started
	if err := mesh.ValidName("module", p.in.Module); err != nil {
		return p.end(meshapi.PlanRefused, err.Error())
	}
	if err := mesh.ValidCommit(p.in.Commit); err != nil {
		return p.end(meshapi.PlanRefused, err.Error())
	}

	var tr meshapi.TargetsResult
	if err := workflow.ExecuteLocalActivity(targetsOptions(ctx), acts.Targets, meshapi.TargetsInput{Module: p.in.Module}).Get(ctx, &tr); err != nil {
		return p.end(meshapi.PlanRefused, errorReason(err))
	}
	if len(tr.Targets) == 0 {
		return p.end(meshapi.PlanRefused, fmt.Sprintf("no machine runs module %s", p.in.Module))
	}
	if p.searchAttributes {
		machines := make([]string, len(tr.Targets))
		for i, t := range tr.Targets {
			machines[i] = t.Machine
		}
		if err := workflow.UpsertTypedSearchAttributes(ctx, meshapi.SAMachines.ValueSet(machines)); err != nil {
			workflow.GetLogger(ctx).Warn("could not set the machines search attribute", "error", err)
		}
	}
	for _, t := range tr.Targets {
		if n := len(p.st.Tiers); n == 0 || p.st.Tiers[n-1].Tier != t.Tier {
			p.st.Tiers = append(p.st.Tiers, meshapi.TierState{Tier: t.Tier, State: meshapi.TierWaiting})
		}
		ts := &p.st.Tiers[len(p.st.Tiers)-1]
		ts.Machines = append(ts.Machines, meshapi.MachineProgress{Machine: t.Machine, State: meshapi.MachineWaiting})
	}
	p.details(ctx, "building")

	// Build.
	var b mesh.Build
	err := p.step(ctx, func(sctx workflow.Context) error {
		return workflow.ExecuteActivity(buildOptions(sctx, p.in.Module, p.in.Commit), acts.Build,
			meshapi.BuildInput{Plan: p.st.Plan, Module: p.in.Module, Commit: p.in.Commit}).Get(sctx, &b)
	})
	if st, err, done := p.interrupted(ctx, err, "build failed: "); done {
		return st, err
	}
	p.st.Build = &b

	// Compose every target; the plan records what it intends.
	p.st.State = meshapi.PlanComposing
	p.details(ctx, "composing")
	decls := make([]mesh.Declaration, len(tr.Targets))
	err = p.step(ctx, func(sctx workflow.Context) error {
		futures := make([]workflow.Future, len(tr.Targets))
		for i, t := range tr.Targets {
			futures[i] = workflow.ExecuteActivity(composeOptions(sctx, p.policy, t.Machine), acts.Compose,
				meshapi.ComposeInput{Plan: p.st.Plan, Target: t, Build: b})
		}
		var errs []string
		for i, f := range futures {
			var res meshapi.ComposeResult
			if err := f.Get(sctx, &res); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %s", tr.Targets[i].Machine, errorReason(err)))
				continue
			}
			decls[i] = res.Declaration
			if len(res.Unknown) > 0 {
				p.note(tr.Targets[i].Machine, strings.Join(res.Unknown, "; "))
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	})
	if st, err, done := p.interrupted(ctx, err, "compose failed for "); done {
		return st, err
	}
	byMachine := map[string]mesh.Declaration{}
	for i, t := range tr.Targets {
		byMachine[t.Machine] = decls[i]
	}

	// Push, tier by tier.
	for ti := range p.st.Tiers {
		if st, err, done := p.hold(ctx, ti); done {
			return st, err
		}
		if st, err, done := p.pushTier(ctx, ti, byMachine); done {
			return st, err
		}
	}
	superseded := 0
	total := 0
	for _, t := range p.st.Tiers {
		for _, m := range t.Machines {
			total++
			if m.State == meshapi.MachineSuperseded {
				superseded++
			}
		}
	}
	if superseded == total {
		return p.end(meshapi.PlanSuperseded, fmt.Sprintf("a newer build of %s runs, or is queued ahead, on every machine (%d)", p.in.Module, total))
	}
	return p.end(meshapi.PlanConverged, fmt.Sprintf("%s generation %d runs on %d machines (%d already ran newer)",
		p.in.Module, b.Generation, total-superseded, superseded))
}

// hold waits before tier ti while the plan is paused or the tier is gated.
func (p *plan) hold(ctx workflow.Context, ti int) (meshapi.PlanState, error, bool) {
	tier := &p.st.Tiers[ti]
	gated := slices.Contains(p.in.Gates, tier.Tier)
	for {
		if p.aborted {
			return p.endAborted(ctx)
		}
		switch {
		case p.st.Paused:
			p.st.State = meshapi.PlanPaused
			p.details(ctx, fmt.Sprintf("paused before tier %d", tier.Tier))
		case gated && !p.approved[tier.Tier]:
			p.st.State, tier.State, p.gate = meshapi.PlanGated, meshapi.TierGated, tier.Tier
			p.details(ctx, fmt.Sprintf("waiting for approval before tier %d", tier.Tier))
		default:
			p.gate = -1
			return p.st, nil, false
		}
		err := workflow.Await(ctx, func() bool {
			return p.aborted || (!p.st.Paused && (!gated || p.approved[tier.Tier]))
		})
		if err != nil {
			return p.cancelled(ctx, err)
		}
	}
}

// pushTier hands the tier's declarations to the machine workflows and waits
// for every answer.
func (p *plan) pushTier(ctx workflow.Context, ti int, decls map[string]mesh.Declaration) (meshapi.PlanState, error, bool) {
	tier := &p.st.Tiers[ti]
	start := workflow.Now(ctx)
	p.st.State, tier.State = meshapi.PlanPushing, meshapi.TierPushing
	p.details(ctx, fmt.Sprintf("pushing tier %d", tier.Tier))
	var reqs []meshapi.PushRequest
	for mi := range tier.Machines {
		m := &tier.Machines[mi]
		m.State = meshapi.MachinePushing
		reqs = append(reqs, meshapi.PushRequest{
			Request:     meshapi.RequestID(p.st.Plan, m.Machine),
			Plan:        p.st.Plan,
			Machine:     m.Machine,
			Build:       *p.st.Build,
			Declaration: decls[m.Machine],
			Policy:      p.policy,
			Force:       p.in.Force,
		})
	}
	err := p.step(ctx, func(sctx workflow.Context) error {
		return workflow.ExecuteActivity(enqueueOptions(sctx, tier.Tier, len(reqs)), acts.EnqueuePushes, meshapi.EnqueueInput{Requests: reqs}).Get(sctx, nil)
	})
	if err == nil {
		err = workflow.Await(ctx, func() bool { return p.aborted || p.tierAnswered(tier) })
	}
	if st, err, done := p.interrupted(ctx, err, fmt.Sprintf("tier %d: could not hand pushes to machine workflows: ", tier.Tier)); done {
		return st, err, done
	}

	var failed, refused []string
	for _, m := range tier.Machines {
		switch m.State {
		case meshapi.MachineFailed:
			failed = append(failed, fmt.Sprintf("%s: %s", m.Machine, m.Reason))
		case meshapi.MachineRefused, meshapi.MachineCancelled:
			refused = append(refused, fmt.Sprintf("%s: %s", m.Machine, m.Reason))
		}
	}
	defer func() { tierTimed(ctx, p.in.Module, tier.Tier, tier.State, start) }()
	switch {
	case len(failed) > 0:
		tier.State = meshapi.TierHalted
		return p.endWith(meshapi.PlanHalted, fmt.Sprintf("tier %d halted, later tiers untouched: %s", tier.Tier, strings.Join(append(failed, refused...), "; ")))
	case len(refused) > 0:
		tier.State = meshapi.TierHalted
		return p.endWith(meshapi.PlanRefused, fmt.Sprintf("tier %d refused, later tiers untouched: %s", tier.Tier, strings.Join(refused, "; ")))
	}
	tier.State = meshapi.TierConverged
	return p.st, nil, false
}

// note records a reason on a machine that is still waiting, for the UI and
// the CLI to show before its push says more.
func (p *plan) note(machine, reason string) {
	for ti := range p.st.Tiers {
		for mi := range p.st.Tiers[ti].Machines {
			if m := &p.st.Tiers[ti].Machines[mi]; m.Machine == machine {
				m.Reason = reason
			}
		}
	}
}

func (p *plan) tierAnswered(t *meshapi.TierState) bool {
	for _, m := range t.Machines {
		if m.State == meshapi.MachinePushing {
			return false
		}
	}
	return true
}

// step runs fn with a context an abort cancels.
func (p *plan) step(ctx workflow.Context, fn func(workflow.Context) error) error {
	sctx, cancel := workflow.WithCancel(ctx)
	p.cancelStep = cancel
	defer func() { p.cancelStep = nil }()
	return fn(sctx)
}

// interrupted turns a step's error, an abort or a cancellation into the
// plan's end; done is false when the plan goes on.
func (p *plan) interrupted(ctx workflow.Context, err error, haltPrefix string) (meshapi.PlanState, error, bool) {
	switch {
	case ctx.Err() != nil:
		return p.cancelled(ctx, ctx.Err())
	case p.aborted:
		return p.endAborted(ctx)
	case err != nil:
		return p.endWith(meshapi.PlanHalted, haltPrefix+errorReason(err))
	}
	return p.st, nil, false
}

// cancelled ends a plan whose workflow was cancelled: queued pushes are
// withdrawn on a disconnected context, and the workflow reports cancellation.
func (p *plan) cancelled(ctx workflow.Context, err error) (meshapi.PlanState, error, bool) {
	p.aborted, p.abortReason = true, "plan workflow cancelled"
	st, _, _ := p.endAborted(ctx)
	return st, err, true
}

// endAborted withdraws every push still waiting and ends the plan aborted.
func (p *plan) endAborted(ctx workflow.Context) (meshapi.PlanState, error, bool) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var fs []workflow.Future
	for ti := range p.st.Tiers {
		for mi := range p.st.Tiers[ti].Machines {
			m := &p.st.Tiers[ti].Machines[mi]
			if m.State != meshapi.MachinePushing {
				continue
			}
			req := meshapi.RequestID(p.st.Plan, m.Machine)
			fs = append(fs, workflow.SignalExternalWorkflow(dctx, meshapi.MachineID(m.Machine), "", meshapi.SignalCancelPush,
				meshapi.CancelPush{Request: req, Reason: p.abortReason}))
			m.State, m.Reason = meshapi.MachineCancelled, p.abortReason+" (a push already sending finishes)"
		}
	}
	for _, f := range fs {
		if err := f.Get(dctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("could not withdraw a queued push", "error", err)
		}
	}
	return p.endWith(meshapi.PlanAborted, p.abortReason)
}

func (p *plan) endWith(state, reason string) (meshapi.PlanState, error, bool) {
	st, err := p.end(state, reason)
	return st, err, true
}

// end sets the terminal state: tiers not reached are skipped.
func (p *plan) end(state, reason string) (meshapi.PlanState, error) {
	p.st.State, p.st.Reason = state, reason
	if p.ctx != nil {
		p.details(p.ctx, state+": "+reason)
		planEnded(p.ctx, p.in.Module, state)
	}
	for ti := range p.st.Tiers {
		if s := p.st.Tiers[ti].State; s == meshapi.TierWaiting || s == meshapi.TierGated {
			p.st.Tiers[ti].State = meshapi.TierSkipped
		}
	}
	return p.st, nil
}

// publish keeps the MeshrollState search attribute equal to the plan's
// state, so that plans are findable by state in the Web UI and the CLI.
func (p *plan) publish() {
	if !p.searchAttributes || p.st.State == p.published {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(p.ctx, meshapi.SAState.ValueSet(p.st.State)); err != nil {
		workflow.GetLogger(p.ctx).Warn("could not set the state search attribute", "error", err)
		return
	}
	p.published = p.st.State
}

// details is what the Web UI shows as the plan's current details; the state
// search attribute follows it.
func (p *plan) details(ctx workflow.Context, now string) {
	p.publish()
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** %s", p.in.Module, short(p.in.Commit))
	if p.st.Build != nil {
		fmt.Fprintf(&b, " (generation %d, %s)", p.st.Build.Generation, short(p.st.Build.Digest))
	}
	fmt.Fprintf(&b, ": %s\n", now)
	for _, t := range p.st.Tiers {
		fmt.Fprintf(&b, "- tier %d: %s\n", t.Tier, t.State)
	}
	workflow.SetCurrentDetails(ctx, b.String())
}
