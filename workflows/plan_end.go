package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// ending is how a plan ends: the state and the reason a person on call
// reads. Whichever step decides it returns it as an error, every step above
// passes it up unchanged, and run turns it into the plan's result in one
// place (end).
type ending struct {
	state  meshapi.PlanStatus
	reason string
	// cancelled is the workflow's own cancellation: the plan records that
	// it ended aborted, and the workflow then fails with this error.
	cancelled error
}

func (e *ending) Error() string { return string(e.state) + ": " + e.reason }

// endAs ends the plan in state for reason.
func endAs(state meshapi.PlanStatus, reason string) error {
	return &ending{state: state, reason: reason}
}

// endingOf is the ending roll returned. Anything else is a bug in a step
// (every step returns an ending or nothing); it halts the plan, naming the
// error, rather than failing the workflow.
func endingOf(err error) *ending {
	var e *ending
	if errors.As(err, &e) {
		return e
	}
	return &ending{state: meshapi.PlanHalted, reason: "internal error: " + err.Error()}
}

// interrupted turns a step's error, an abort or a cancellation into the
// plan's ending; nil means the plan goes on.
func (p *plan) interrupted(ctx workflow.Context, err error, haltPrefix string) error {
	switch {
	case ctx.Err() != nil:
		return p.cancelled(ctx, ctx.Err())
	case p.aborted:
		return p.endAborted(ctx)
	case err != nil:
		return endAs(meshapi.PlanHalted, haltPrefix+errorReason(err))
	}
	return nil
}

// cancelled ends a plan whose workflow was cancelled: queued pushes are
// withdrawn, and the workflow reports the cancellation.
func (p *plan) cancelled(ctx workflow.Context, err error) error {
	p.aborted, p.abortReason = true, "plan workflow cancelled"
	p.withdraw(ctx)
	return &ending{state: meshapi.PlanAborted, reason: p.abortReason, cancelled: err}
}

// endAborted withdraws every push still waiting and ends the plan aborted.
func (p *plan) endAborted(ctx workflow.Context) error {
	p.withdraw(ctx)
	return endAs(meshapi.PlanAborted, p.abortReason)
}

// withdraw asks the machine workflows to drop every push of this plan still
// waiting, on a context a cancelled workflow still sends from. A push
// already sending finishes: a declaration half-sent is worse than one sent.
func (p *plan) withdraw(ctx workflow.Context) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var fs []workflow.Future
	for ti := range p.st.Tiers {
		for mi := range p.st.Tiers[ti].Machines {
			m := &p.st.Tiers[ti].Machines[mi]
			if m.State != meshapi.MachinePushing {
				continue
			}
			req := meshapi.RequestID(p.st.Plan, m.Machine)
			if p.unhanded[req] {
				// Never handed over: nothing to withdraw.
				m.State, m.Reason = meshapi.MachineCancelled, p.abortReason+" (its push was never handed over)"
				p.inFlight[ti]--
				continue
			}
			fs = append(fs, workflow.SignalExternalWorkflow(dctx, meshapi.MachineID(m.Machine), "", meshapi.SignalCancelPush,
				meshapi.CancelPush{Request: req, Reason: p.abortReason}))
			m.State, m.Reason = meshapi.MachineCancelled, p.abortReason+" (a push already sending finishes)"
			p.inFlight[ti]--
		}
	}
	for _, f := range fs {
		if err := f.Get(dctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("could not withdraw a queued push", "error", err)
		}
	}
}

// end sets the terminal state, marks the tiers not reached and the
// machines never pushed (or never handed over) skipped, and shows it.
func (p *plan) end(state meshapi.PlanStatus, reason string) {
	p.st.State, p.st.Reason = state, reason
	for ti := range p.st.Tiers {
		if s := p.st.Tiers[ti].State; s == meshapi.TierWaiting || s == meshapi.TierGated {
			p.st.Tiers[ti].State = meshapi.TierSkipped
		}
	}
	p.eachMachine(func(m *meshapi.MachineProgress) {
		switch {
		case m.State == meshapi.MachineWaiting:
			m.State = meshapi.MachineSkipped
		case len(p.unhanded) > 0 && m.State == meshapi.MachinePushing && p.unhanded[meshapi.RequestID(p.st.Plan, m.Machine)]:
			m.State, m.Reason = meshapi.MachineSkipped, "never handed over: the plan ended first"
		}
	})
	p.details(p.ctx, string(state)+": "+reason)
	planEnded(p.ctx, p.in.Module, state)
}

// outcome is how a plan that pushed every tier ends: superseded when a
// newer build already ran (or was queued ahead) on every machine, else
// converged.
func (p *plan) outcome(b mesh.Build) error {
	superseded, total := 0, 0
	for _, t := range p.st.Tiers {
		for _, m := range t.Machines {
			total++
			if m.State == meshapi.MachineSuperseded {
				superseded++
			}
		}
	}
	if superseded == total {
		return endAs(meshapi.PlanSuperseded, fmt.Sprintf("a newer build of %s runs, or is queued ahead, on every machine (%d)", p.in.Module, total))
	}
	// A plan that got here halted on no failure: every failed machine was
	// within its tier's budget (and put back on what it ran).
	var withinBudget []string
	for _, t := range p.st.Tiers {
		f, _ := tally(&t)
		withinBudget = append(withinBudget, f...)
	}
	failed := len(withinBudget)
	n := total - superseded - failed
	reason := fmt.Sprintf("%s generation %d runs on %d %s (%d already ran newer)",
		p.in.Module, b.Generation, n, plural(n, "machine", "machines"), superseded)
	if s := p.in.Sync; s != nil && s.Remove {
		reason = fmt.Sprintf("stopped %s on %s (it ran generation %d, %s), which the config no longer gives it",
			p.in.Module, s.Machine, b.Generation, mesh.ShortCommit(b.Commit))
	}
	if p.in.Rollback != nil {
		reason = fmt.Sprintf("rolled %s back to generation %d (%s) on %d %s (%d already at or below it), from %s; %s",
			p.in.Module, b.Generation, mesh.ShortCommit(b.Commit), n, plural(n, "machine", "machines"), superseded, p.st.RolledBackFrom, p.in.Rollback.Words())
	}
	if failed > 0 {
		reason += fmt.Sprintf("; failed within their tier's budget and put back on what they ran (%d): %s",
			failed, someOf(withinBudget))
	}
	return endAs(meshapi.PlanConverged, reason)
}
