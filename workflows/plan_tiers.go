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

// hand gives requests to their machine workflows and waits until every
// machine of the tier has its answer (none is pushing or reverting) and
// its relays, if any, have ended. A hand-over of more than p.handWindow
// requests gives the first p.handWindow at once and the others as answers
// make room (see awaitAnswers): every machine is handed its request, only
// later.
func (p *plan) hand(ctx workflow.Context, ti int, reqs []meshapi.PushRequest, haltPrefix string) error {
	first := len(reqs)
	p.unhanded = nil
	if len(reqs) > p.handWindow && workflow.GetVersion(ctx, changePlanHandWindow, workflow.DefaultVersion, 1) >= 1 {
		first = p.handWindow
		p.holdBack(reqs[first:])
		p.st.Tiers[ti].Window = p.handWindow
		p.showDetails(ctx)
	}
	err := p.step(ctx, func(sctx workflow.Context) error {
		if err := p.startRelays(sctx, reqs); err != nil {
			return err
		}
		return handOver(sctx, reqs[:first])
	})
	if err == nil {
		err = p.awaitAnswers(ctx, ti, reqs, first)
	}
	// A relay that ended after passing every answer on cost nothing.
	lost := p.relayLost
	p.relayLost = ""
	if err == nil && !p.aborted && !p.tierAnswered(ti) {
		return endAs(meshapi.PlanHalted, fmt.Sprintf("tier %d halted: %s; a push still queued finds the plan ended and is dropped",
			p.st.Tiers[ti].Tier, lost))
	}
	return p.interrupted(ctx, err, haltPrefix)
}

// turnWords is the reason a machine's push shows while it waits for room
// in its plan's hand-over window.
func (p *plan) turnWords() string {
	return fmt.Sprintf("%s: the plan has %d pushes handed over and unanswered at most (push.hand_window)", meshapi.WaitsItsTurn, p.handWindow)
}

// holdBack marks requests as waiting for room in the hand-over window: a
// withdrawal has nothing to withdraw from their machine workflows, a plan
// that ends first skips them (see end), and a push among them says why it
// has not started.
func (p *plan) holdBack(reqs []meshapi.PushRequest) {
	p.unhanded = make(map[string]bool, len(reqs))
	why := p.turnWords()
	for _, r := range reqs {
		p.unhanded[r.Request] = true
		if at := p.byRequest[r.Request]; !at.putBack {
			p.progress(at).Reason = why
		}
	}
}

// handedOut marks requests held back as handed over.
func (p *plan) handedOut(reqs []meshapi.PushRequest) {
	why := p.turnWords()
	for _, r := range reqs {
		delete(p.unhanded, r.Request)
		if m := p.progress(p.byRequest[r.Request]); m.Reason == why {
			m.Reason = ""
		}
	}
}

// noAnswerIn begins the words of a machine handed again (see awaitAnswers).
const noAnswerIn = "no answer in "

// awaitAnswers waits until every machine of the tier has its answer and
// its relays have ended, or the plan is aborted, or a relay ended short.
// The first handed of reqs are handed over; the others are handed as
// answers leave room for at least a quarter of p.handWindow, so that at
// most p.handWindow are handed and unanswered at once.
//
// A tier that hears no answer for p.rehandAfter hands its unanswered
// requests over again, and the next p.handWindow of those it has not
// handed: a machine workflow terminated by hand took the requests it held
// with it, machines may wait in line behind other plans, and without this
// the plan would wait for ever. Handed again, a request starts the
// terminated workflow's successor, which pushes it (the host knows a
// request it already applied); a machine workflow still holding it drops
// the copy, and one that answered answers again. Each quiet hand-over
// doubles the wait, up to meshapi.RehandAtMost, since a machine may wait
// in line for hours behind other plans.
func (p *plan) awaitAnswers(ctx workflow.Context, ti int, reqs []meshapi.PushRequest, handed int) error {
	done := func() bool {
		return p.aborted || (p.tierAnswered(ti) && p.relaysOpen == 0) || p.relayLost != ""
	}
	if workflow.GetVersion(ctx, changePlanRehand, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return workflow.Await(ctx, done)
	}
	// open is how many handed requests wait for their answer: the tier's
	// machines in flight include those not handed yet.
	open := func() int { return p.inFlight[ti] - (len(reqs) - handed) }
	room := func() bool {
		rest := len(reqs) - handed
		return rest > 0 && p.handWindow-open() >= min(max(p.handWindow/4, 1), rest)
	}
	handNext := func(n int) error {
		next := reqs[handed:min(handed+n, len(reqs))]
		handed += len(next)
		p.handedOut(next)
		return p.step(ctx, func(sctx workflow.Context) error { return handOver(sctx, next) })
	}
	wait, since := p.rehandAfter, workflow.Now(ctx)
	for {
		left := p.inFlight[ti]
		// The SDK leaves the timer of an await that ends by its condition
		// running; cancelled here, it does not fire later as a workflow
		// task of its own.
		tctx, cancel := workflow.WithCancel(ctx)
		quiet := workflow.NewTimer(tctx, wait)
		var err error
		for err == nil && !done() && !quiet.IsReady() {
			if err = workflow.Await(ctx, func() bool { return done() || room() || quiet.IsReady() }); err == nil && room() && !done() {
				n := p.handWindow - open()
				if n > handBatch {
					n -= n % handBatch // whole hand-over activities
				}
				err = handNext(n)
				since = workflow.Now(ctx)
			}
		}
		cancel()
		if err != nil || done() {
			return err
		}
		if p.inFlight[ti] != left {
			continue // answers came: not quiet
		}
		var again []meshapi.PushRequest
		for _, r := range reqs[:handed] {
			if at, ok := p.byRequest[r.Request]; ok && p.waiting(at) {
				again = append(again, r)
				if m := p.progress(at); m.Reason == "" || strings.HasPrefix(m.Reason, noAnswerIn) {
					m.Reason = fmt.Sprintf("%s%s: handed to its machine workflow again", noAnswerIn, workflow.Now(ctx).Sub(since))
				}
			}
		}
		rest := len(reqs) - handed
		if len(again) == 0 && rest == 0 {
			continue // only relays still to end
		}
		if rest > 0 {
			workflow.GetLogger(ctx).Warn("no answer for a while: handing the next pushes over though the window is full",
				"tier", p.st.Tiers[ti].Tier, "machines", min(rest, p.handWindow), "in_flight", open(), "after", wait)
			if err := handNext(p.handWindow); err != nil {
				return err
			}
		}
		if len(again) > 0 {
			workflow.GetLogger(ctx).Warn("no answer for a while: handing unanswered pushes to their machine workflows again",
				"tier", p.st.Tiers[ti].Tier, "machines", len(again), "after", wait)
			if err := p.step(ctx, func(sctx workflow.Context) error { return handOver(sctx, again) }); err != nil {
				return err
			}
		}
		wait = min(2*wait, meshapi.RehandAtMost)
	}
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
