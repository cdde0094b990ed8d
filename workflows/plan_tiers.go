package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// composeBatch is how many machines one ComposeTargets activity composes:
// few enough that its result (every declaration) stays far below the
// payload limits, many enough that a thousand machines cost ten
// activities.
const composeBatch = 100

// compose composes every target's declaration, composeBatch at a time (each
// batch an activity, not a local one, so that its input and result, what
// the plan intends, stay readable in the plan's history), all batches at
// once. The plan records these declarations: that is what it intends. Every
// machine that could not be composed is named in the plan's end.
func (p *plan) compose(ctx workflow.Context, targets []meshapi.Target, b mesh.Build) (map[string]mesh.Declaration, error) {
	decls := map[string]mesh.Declaration{}
	err := p.step(ctx, func(sctx workflow.Context) error {
		type batch struct {
			targets []meshapi.Target
			f       workflow.Future
		}
		var batches []batch
		for from := 0; from < len(targets); from += composeBatch {
			bt := targets[from:min(from+composeBatch, len(targets))]
			f := workflow.ExecuteActivity(composeOptions(sctx, p.policy, len(bt)), acts.ComposeTargets,
				meshapi.ComposeTargetsInput{Plan: p.st.Plan, Targets: bt, Build: b})
			batches = append(batches, batch{bt, f})
		}
		var errs []string
		for _, bt := range batches {
			var res meshapi.ComposeTargetsResult
			if err := bt.f.Get(sctx, &res); err != nil {
				for _, t := range bt.targets {
					errs = append(errs, fmt.Sprintf("%s: %s", t.Machine, errorReason(err)))
				}
				continue
			}
			for i, r := range res.Results {
				t := bt.targets[i]
				if r.Error != "" {
					errs = append(errs, fmt.Sprintf("%s: %s", t.Machine, r.Error))
					continue
				}
				decls[t.Machine] = r.Declaration
				if len(r.Unknown) > 0 {
					p.note(t.Machine, strings.Join(r.Unknown, "; "))
				}
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	})
	return decls, p.interrupted(ctx, err, "compose failed for ")
}

// hold waits before tier ti while the plan is paused or the tier is gated.
func (p *plan) hold(ctx workflow.Context, ti int) error {
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
			return nil
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
// for every answer. A machine that failed halts the plan, one that refused
// ends it refused; later tiers stay untouched either way.
func (p *plan) pushTier(ctx workflow.Context, ti int, decls map[string]mesh.Declaration) error {
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
		return workflow.ExecuteLocalActivity(handOptions(sctx), acts.HandPushes, meshapi.HandPushesInput{Requests: reqs}).Get(sctx, nil)
	})
	if err == nil {
		err = workflow.Await(ctx, func() bool { return p.aborted || p.tierAnswered(tier) })
	}
	if err := p.interrupted(ctx, err, fmt.Sprintf("tier %d: could not hand pushes to machine workflows: ", tier.Tier)); err != nil {
		return err
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
		return endAs(meshapi.PlanHalted, fmt.Sprintf("tier %d halted, later tiers untouched: %s", tier.Tier, strings.Join(append(failed, refused...), "; ")))
	case len(refused) > 0:
		tier.State = meshapi.TierHalted
		return endAs(meshapi.PlanRefused, fmt.Sprintf("tier %d refused, later tiers untouched: %s", tier.Tier, strings.Join(refused, "; ")))
	}
	tier.State = meshapi.TierConverged
	return nil
}

// take records a machine's answer and shows it in the plan's state at once.
// An answer for a machine no longer being pushed (a repeat) changes
// nothing.
func (p *plan) take(r meshapi.PushResult) {
	p.eachMachine(func(m *meshapi.MachineProgress) {
		if meshapi.RequestID(p.st.Plan, m.Machine) == r.Request && m.State == meshapi.MachinePushing {
			m.State, m.Reason, m.Seq, m.Rebased = r.Outcome, r.Reason, r.Seq, r.Rebased
		}
	})
}

// note records a reason on a machine that is still waiting, for the UI and
// the CLI to show before its push says more.
func (p *plan) note(machine, reason string) {
	p.eachMachine(func(m *meshapi.MachineProgress) {
		if m.Machine == machine {
			m.Reason = reason
		}
	})
}

// eachMachine calls fn with every machine of every tier, in order.
func (p *plan) eachMachine(fn func(*meshapi.MachineProgress)) {
	for ti := range p.st.Tiers {
		for mi := range p.st.Tiers[ti].Machines {
			fn(&p.st.Tiers[ti].Machines[mi])
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
