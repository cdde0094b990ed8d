package workflows

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// analyseBy is who the journal names for a put-back the plan does itself.
const analyseBy = "meshroll analysis"

// takeMeasurements records each measurement a running Analyse activity
// signals, so that the plan's state shows it at once, and what a check
// asks, announced before its first measurement (waiting out its initial
// delay).
func (p *plan) takeMeasurements(ctx workflow.Context, sig *planSignals) {
	onSignal(ctx, sig, meshapi.SignalAnalysisStarted, func(s meshapi.AnalysisStarted) {
		if c := p.check(s.Tier, s.Check.Check); c != nil && len(c.Measurements) == 0 &&
			(c.Verdict == meshapi.AnalysisWaiting || c.Verdict == meshapi.AnalysisRunning) {
			*c = s.Check
			c.Measurements = nil
			p.showDetails(p.ctx)
		}
	})
	onSignal(ctx, sig, meshapi.SignalMeasured, func(m meshapi.Measured) {
		c := p.check(m.Tier, m.Check.Check)
		if c == nil || c.Verdict.Decided() || c.Verdict == meshapi.AnalysisFailed {
			return
		}
		if len(c.Measurements) == 0 {
			*c = m.Check
			c.Measurements, c.Verdict = nil, meshapi.AnalysisRunning
		}
		if c.Add(m.Measurement) {
			p.showDetails(p.ctx)
		}
	})
}

// check is the tier's check by name, nil when the plan has no such check
// running.
func (p *plan) check(tier int, name string) *meshapi.AnalysisCheck {
	for ti := range p.st.Tiers {
		if p.st.Tiers[ti].Tier != tier {
			continue
		}
		for ci := range p.st.Tiers[ti].Analysis {
			if c := &p.st.Tiers[ti].Analysis[ci]; c.Check == name {
				return c
			}
		}
	}
	return nil
}

// analyse runs tier ti's analysis checks on its machines that took the
// build, each an Analyse activity, alongside the tier's bake when it has
// one (bake > 0), and decides what their verdicts mean: the first check
// that fails (unless a dry run) stops the others and the bake, puts the
// tier's machines back and halts the plan; a check that could not be
// measured holds the plan at a gate until a person approves it or aborts;
// a failed dry run is reported and passes.
func (p *plan) analyse(ctx workflow.Context, ti int, machines []string, bake time.Duration) error {
	tier := &p.st.Tiers[ti]
	checks := p.policyOf(tier).Analysis
	since := workflow.Now(ctx)
	tier.Analysis = make([]meshapi.AnalysisCheck, len(checks))
	for i, name := range checks {
		tier.Analysis[i] = meshapi.AnalysisCheck{Check: name, Verdict: meshapi.AnalysisWaiting}
	}
	tier.State = meshapi.TierAnalysing
	words := fmt.Sprintf("tier %d analysing (%s)", tier.Tier, strings.Join(checks, ", "))
	if bake > 0 {
		until := since.Add(bake)
		tier.BakeUntil = &until
		words += fmt.Sprintf(", baking for %s until %s", bake, until.UTC().Format("15:04:05 MST"))
	}
	if ti+1 < len(p.st.Tiers) {
		words += fmt.Sprintf("; tier %d waits", p.st.Tiers[ti+1].Tier)
	}
	p.details(ctx, words)

	var bakeErr error
	err := p.step(ctx, func(sctx workflow.Context) error {
		actx, stop := workflow.WithCancel(sctx)
		sel := workflow.NewSelector(actx)
		pending := 0
		if bake > 0 {
			pending++
			f := workflow.ExecuteActivity(bakeOptions(actx, p.policy, bake, tier.Tier), acts.Bake, meshapi.BakeInput{
				Plan: p.st.Plan, Tier: tier.Tier, Machines: machines, Build: *p.st.Build, Bake: bake,
			})
			sel.AddFuture(f, func(f workflow.Future) {
				pending--
				if bakeErr = f.Get(actx, nil); bakeErr != nil && actx.Err() == nil {
					stop()
				}
			})
		}
		for i, name := range checks {
			pending++
			f := workflow.ExecuteActivity(analyseOptions(actx, tier.Tier, name), acts.Analyse, meshapi.AnalyseInput{
				Plan: p.st.Plan, Build: *p.st.Build, Tier: tier.Tier, Machines: machines, Check: name, Since: since,
			})
			sel.AddFuture(f, func(f workflow.Future) {
				pending--
				c := &tier.Analysis[i]
				var res meshapi.AnalyseResult
				switch err := f.Get(actx, &res); {
				case err != nil && actx.Err() != nil:
					c.Verdict = meshapi.AnalysisCancelled
				case err != nil:
					c.Verdict, c.Reason = meshapi.AnalysisInconclusive, errorReason(err)
				default:
					// The result is the check's record: it went on from
					// every measurement the plan had taken when it was
					// retried, so it replaces what the signals built.
					*c = res.Check
				}
				analysisEnded(ctx, p.in.Module, tier.Tier, c.Check, c.Verdict)
				p.showDetails(ctx)
				if c.Verdict == meshapi.AnalysisFailed && !c.DryRun {
					stop()
				}
			})
		}
		for pending > 0 {
			sel.Select(actx)
		}
		return nil
	})
	tier.BakeUntil = nil
	if err := p.interrupted(ctx, err, ""); err != nil {
		tier.State = meshapi.TierHalted
		return err
	}
	for _, c := range tier.Analysis {
		if c.Verdict == meshapi.AnalysisFailed && !c.DryRun {
			tier.State = meshapi.TierHalted
			return p.putBack(ctx, ti, fmt.Sprintf("tier %d failed its analysis: %s: %s", tier.Tier, c.Check, cmp.Or(c.Reason, c.Summary())))
		}
	}
	if bakeErr != nil {
		tier.State = meshapi.TierHalted
		return endAs(meshapi.PlanHalted, fmt.Sprintf("tier %d failed its bake of %s, later tiers untouched: %s", tier.Tier, bake, errorReason(bakeErr)))
	}
	if err := p.holdInconclusive(ctx, ti); err != nil {
		tier.State = meshapi.TierHalted
		return err
	}
	tier.State = meshapi.TierConverged
	return nil
}

// holdInconclusive waits at a gate while any of tier ti's checks is
// inconclusive, until a person approves the tier's analysis (starter plan
// approve) or aborts the plan.
func (p *plan) holdInconclusive(ctx workflow.Context, ti int) error {
	tier := &p.st.Tiers[ti]
	var open []string
	for _, c := range tier.Analysis {
		if c.Verdict == meshapi.AnalysisInconclusive && !c.DryRun { // a dry run only reports
			open = append(open, c.Check, c.Reason)
		}
	}
	if len(open) == 0 {
		return nil
	}
	p.st.State, p.analysisGate = meshapi.PlanGated, tier.Tier
	p.details(ctx, fmt.Sprintf("tier %d's analysis is inconclusive, the plan waits for a person; "+
		"approve it with `starter plan approve %s` or abort with `starter plan abort %s`:\n\n%s",
		tier.Tier, p.st.Plan, p.st.Plan, strings.TrimSuffix(meshapi.DetailList(open...), "\n")))
	err := workflow.Await(ctx, func() bool { return p.aborted || p.analysisPassedBy != "" })
	p.analysisGate = -1
	if err != nil {
		return p.cancelled(ctx, err)
	}
	if p.aborted {
		return p.endAborted(ctx)
	}
	for i := range tier.Analysis {
		if c := &tier.Analysis[i]; c.Verdict == meshapi.AnalysisInconclusive && !c.DryRun {
			c.Verdict, c.Reason = meshapi.AnalysisApproved, c.Reason+"; passed by "+p.analysisPassedBy
		}
	}
	p.analysisPassedBy = ""
	p.st.State = meshapi.PlanPushing
	return nil
}

// putBack puts tier ti's machines that took the build back on the newest
// healthy build below it, through their machine workflows, as a rollback
// of the one build (rejected in the catalogue, so that no stale plan sends
// it again), and ends the plan halted with why and what was put back.
func (p *plan) putBack(ctx workflow.Context, ti int, why string) error {
	tier := &p.st.Tiers[ti]
	var took []string
	for _, m := range tier.Machines {
		if m.State == meshapi.MachineConverged {
			took = append(took, m.Machine)
		}
	}
	rb := meshapi.Rollback{By: analyseBy, Reason: why}
	p.details(ctx, why+"; putting its machines back")
	var res meshapi.RollbackTargetResult
	err := p.step(ctx, func(sctx workflow.Context) error {
		return workflow.ExecuteActivity(rollbackOptions(sctx, p.policy, fmt.Sprintf("find what to put tier %d back on", tier.Tier)), acts.RollbackTarget,
			meshapi.RollbackTargetInput{Plan: p.st.Plan, Module: p.in.Module, Rollback: rb, Machines: took, From: p.st.Build}).Get(sctx, &res)
	})
	if ctx.Err() != nil || p.aborted {
		return p.interrupted(ctx, err, "")
	}
	if err != nil {
		return endAs(meshapi.PlanHalted, fmt.Sprintf("%s; could not put its machines back, they run the build: %s; later tiers untouched", why, errorReason(err)))
	}
	var targets []meshapi.Target
	putBack := setOf(res.Machines)
	for _, t := range p.targetList {
		if putBack[t.Machine] {
			targets = append(targets, t)
		}
	}
	decls, err := p.compose(ctx, targets, res.Build, nil)
	if err != nil {
		return err
	}
	var reqs []meshapi.PushRequest
	for mi := range tier.Machines {
		d, ok := decls[tier.Machines[mi].Machine]
		if !ok {
			continue
		}
		m := p.send(ti, mi, meshapi.MachineReverting)
		m.Reason = why
		reqs = append(reqs, meshapi.PushRequest{
			Request: meshapi.PutBackID(p.st.Plan, m.Machine), Plan: p.st.Plan, Machine: m.Machine,
			Build: res.Build, Declaration: d, Policy: p.policy, Rollback: &rb, From: p.st.Build,
		})
	}
	if err := p.hand(ctx, ti, reqs, "could not hand the put-back to machine workflows: "); err != nil {
		return err
	}
	var back, not []string
	for mi := range tier.Machines {
		switch m := &tier.Machines[mi]; m.State {
		case meshapi.MachineReverted:
			back = append(back, m.Machine)
			m.Reason = cmp.Or(m.Reason, fmt.Sprintf("put back on generation %d (%s)", res.Build.Generation, mesh.ShortCommit(res.Build.Commit)))
		case meshapi.MachineFailed:
			not = append(not, m.Machine+": "+m.Reason)
		}
	}
	reason := fmt.Sprintf("%s; %s put back on generation %d (%s) and generation %d rejected",
		why, joinOrNone(back), res.Build.Generation, mesh.ShortCommit(res.Build.Commit), p.st.Build.Generation)
	if len(not) > 0 {
		reason += "; not put back: " + strings.Join(not, "; ")
	}
	return endAs(meshapi.PlanHalted, reason+"; later tiers untouched")
}

// joinOrNone names machines, or says there were none.
func joinOrNone(machines []string) string {
	if len(machines) == 0 {
		return "no machine"
	}
	return strings.Join(machines, ", ")
}

// analyseOptions are an Analyse activity's: it heartbeats while it waits
// for its next measurement, so a worker that dies is noticed within the
// heartbeat timeout and the retry goes on from the measurements it
// heartbeated. How long it runs is the check's (interval, count and its
// tolerance of errors, in the worker's config), so its own time is bounded
// only loosely.
func analyseOptions(ctx workflow.Context, tier int, check string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    20 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
		Summary:             fmt.Sprintf("analyse tier %d: %s", tier, check),
	})
}
