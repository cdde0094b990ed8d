package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

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
			p.details(ctx, fmt.Sprintf("paused before tier %d; resume with `starter plan resume %s`", tier.Tier, p.st.Plan))
		case gated && !p.approved[tier.Tier]:
			p.st.State, tier.State, p.gate = meshapi.PlanGated, meshapi.TierGated, tier.Tier
			p.details(ctx, fmt.Sprintf("waiting for approval before tier %d; approve with `starter plan approve %s --tier %d`", tier.Tier, p.st.Plan, tier.Tier))
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

// pushTier pushes the tier batch by batch (see tierBatches) and waits for
// every answer of a batch before the next. A machine that refused ends the
// plan refused; machines that failed (each put back on what it ran by its
// push) are counted against the tier's budget (each group's, for a tier
// pushed by group), and one more than it allows halts the plan at once,
// the tier's remaining batches and later tiers untouched.
func (p *plan) pushTier(ctx workflow.Context, ti int, decls map[string]mesh.Declaration) error {
	tier := &p.st.Tiers[ti]
	start := workflow.Now(ctx)
	policy := p.policyOf(tier)
	batches := p.tierBatches(tier, policy)
	if len(batches) > 1 {
		tier.Batches = len(batches)
	}
	p.st.State, tier.State = meshapi.PlanPushing, meshapi.TierPushing
	for bi, batch := range batches {
		if err := p.holdBefore(ctx, tier, batch, bi == 0); err != nil {
			return err
		}
		if tier.Batches > 0 {
			tier.Batch = bi + 1
			p.details(ctx, fmt.Sprintf("pushing tier %d, batch %d of %d", tier.Tier, tier.Batch, tier.Batches))
		} else {
			p.details(ctx, fmt.Sprintf("pushing tier %d", tier.Tier))
		}
		if err := p.pushBatch(ctx, ti, batch, decls); err != nil {
			return err
		}
		failed, refused := tally(tier)
		tier.Failed = len(failed)
		if reason, over := p.overBudget(tier, policy, bi+1 < len(batches), failed, refused); over {
			tier.State = meshapi.TierHalted
			tierTimed(ctx, p.in.Module, tier.Tier, tier.State, start)
			return endAs(meshapi.PlanHalted, reason)
		}
		if len(refused) > 0 {
			tier.State = meshapi.TierHalted
			tierTimed(ctx, p.in.Module, tier.Tier, tier.State, start)
			return endAs(meshapi.PlanRefused, fmt.Sprintf("tier %d refused, later tiers untouched: %s", tier.Tier, strings.Join(refused, "; ")))
		}
	}
	tier.State = meshapi.TierConverged
	tierTimed(ctx, p.in.Module, tier.Tier, tier.State, start)
	return nil
}

// bake holds the next tier while tier ti soaks for its policy's bake, its
// machines watched (the Bake activity): one that turns unhealthy, restarts
// or stops running the build fails the tier and halts the plan, later
// tiers untouched. The last tier does not bake: nothing waits on it. A
// tier that names analysis checks runs them alongside its bake (see
// analyse), the last tier too: a plan is not done until its checks pass.
func (p *plan) bake(ctx workflow.Context, ti int) error {
	tier := &p.st.Tiers[ti]
	policy := p.policyOf(tier)
	bake := policy.Bake
	if ti == len(p.st.Tiers)-1 {
		bake = 0
	}
	var machines []string
	for _, m := range tier.Machines {
		if m.State == meshapi.MachineConverged {
			machines = append(machines, m.Machine)
		}
	}
	if len(machines) == 0 {
		return nil
	}
	if len(policy.Analysis) > 0 {
		return p.analyse(ctx, ti, machines, bake)
	}
	if bake <= 0 {
		return nil
	}
	until := workflow.Now(ctx).Add(policy.Bake)
	tier.State, tier.BakeUntil = meshapi.TierBaking, &until
	p.details(ctx, fmt.Sprintf("tier %d baking for %s, until %s; tier %d waits", tier.Tier, policy.Bake,
		until.UTC().Format("15:04:05 MST"), p.st.Tiers[ti+1].Tier))
	err := p.step(ctx, func(sctx workflow.Context) error {
		return workflow.ExecuteActivity(bakeOptions(sctx, p.policy, policy.Bake, tier.Tier), acts.Bake, meshapi.BakeInput{
			Plan: p.st.Plan, Tier: tier.Tier, Machines: machines, Build: *p.st.Build, Bake: policy.Bake,
		}).Get(sctx, nil)
	})
	tier.BakeUntil = nil
	if err := p.interrupted(ctx, err, fmt.Sprintf("tier %d failed its bake of %s, later tiers untouched: ", tier.Tier, policy.Bake)); err != nil {
		tier.State = meshapi.TierHalted
		return err
	}
	tier.State = meshapi.TierConverged
	return nil
}

// pushBatch hands a batch's declarations to their machine workflows and
// waits for every answer.
func (p *plan) pushBatch(ctx workflow.Context, ti int, batch []int, decls map[string]mesh.Declaration) error {
	tier := &p.st.Tiers[ti]
	var reqs []meshapi.PushRequest
	for _, mi := range batch {
		m := p.send(ti, mi, meshapi.MachinePushing)
		reqs = append(reqs, meshapi.PushRequest{
			Request:     meshapi.RequestID(p.st.Plan, m.Machine),
			Plan:        p.st.Plan,
			Machine:     m.Machine,
			Build:       *p.st.Build,
			Declaration: decls[m.Machine],
			Policy:      p.policy,
			Force:       p.in.Force,
			Rollback:    p.in.Rollback,
			Remove:      p.in.Sync != nil && p.in.Sync.Remove,
			Note:        p.overrideWords(),
		})
	}
	return p.hand(ctx, ti, reqs, fmt.Sprintf("tier %d: could not hand pushes to machine workflows: ", tier.Tier))
}

// policyOf is how the tier is pushed: its policy from the plan's targets,
// or all at once with no failure allowed when the targets gave none.
func (p *plan) policyOf(tier *meshapi.TierState) meshapi.TierPolicy {
	if tier.Policy == nil {
		return meshapi.TierPolicy{Tier: tier.Tier}
	}
	return *tier.Policy
}

// batchesOf splits a tier's machines (by index) into the batches they are
// pushed in, in order: at most maxParallel machines each (all of them when
// it is 0), and every machine marked alone in a batch of its own, after
// the others, as the control plane is pushed last.
func batchesOf(machines []meshapi.MachineProgress, alone map[string]bool, maxParallel int) [][]int {
	var rest, solo []int
	for i, m := range machines {
		if alone[m.Machine] {
			solo = append(solo, i)
		} else {
			rest = append(rest, i)
		}
	}
	size := maxParallel
	if size <= 0 {
		size = max(len(rest), 1)
	}
	var out [][]int
	for from := 0; from < len(rest); from += size {
		out = append(out, rest[from:min(from+size, len(rest))])
	}
	for _, i := range solo {
		out = append(out, []int{i})
	}
	return out
}
