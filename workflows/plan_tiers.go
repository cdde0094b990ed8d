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

// pushTier pushes the tier batch by batch (see batchesOf) and waits for
// every answer of a batch before the next. A machine that refused ends the
// plan refused; machines that failed (each put back on what it ran by its
// push) are counted against the tier's budget, and one more than it
// allows halts the plan at once, the tier's remaining batches and later
// tiers untouched.
func (p *plan) pushTier(ctx workflow.Context, ti int, decls map[string]mesh.Declaration) error {
	tier := &p.st.Tiers[ti]
	start := workflow.Now(ctx)
	policy := p.policyOf(tier)
	batches := batchesOf(tier.Machines, p.alone, policy.MaxParallel)
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
		if len(failed) > policy.MaxFailed {
			tier.State = meshapi.TierHalted
			tierTimed(ctx, p.in.Module, tier.Tier, tier.State, start)
			return endAs(meshapi.PlanHalted, haltReason(tier, policy, bi+1 < len(batches), append(failed, refused...)))
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
// machine of the tier has its answer (none is pushing or reverting).
func (p *plan) hand(ctx workflow.Context, ti int, reqs []meshapi.PushRequest, haltPrefix string) error {
	err := p.step(ctx, func(sctx workflow.Context) error { return handOver(sctx, reqs) })
	if err == nil {
		err = workflow.Await(ctx, func() bool { return p.aborted || p.tierAnswered(ti) })
	}
	return p.interrupted(ctx, err, haltPrefix)
}

// handLocally is the most requests the plan hands over by a local
// activity, inside its own workflow task. While a workflow task is open the
// server buffers the signals that arrive, and fails the task when more than
// 100 are buffered (history.maximumBufferedEventsBatch), losing what its
// local activities did: a hand-over of hundreds of machines, taking
// seconds, met their first answers, failed, ran again, signalled every
// machine again, and each answered again, until a plan of a thousand
// machines stalled for a minute and one of three thousand reached the
// server's limit on a run's signals and never finished. At most this many
// answers can arrive during a local hand-over, well below that buffer.
const handLocally = 50

// handBatch is how many requests one HandPushes activity hands over, when
// they are more than handLocally: its input (every declaration) stays as
// small as a compose batch's result.
const handBatch = composeBatch

// handOver gives requests to their machine workflows: a few by a local
// activity, which spares a plan of a few machines two server round trips,
// and more by regular activities, so that the plan's workflow task closes
// as soon as it has scheduled them and the machines' answers never pile up
// behind it (see handLocally).
func handOver(ctx workflow.Context, reqs []meshapi.PushRequest) error {
	if len(reqs) <= handLocally {
		return workflow.ExecuteLocalActivity(handOptions(ctx), acts.HandPushes, meshapi.HandPushesInput{Requests: reqs}).Get(ctx, nil)
	}
	var fs []workflow.Future
	for from := 0; from < len(reqs); from += handBatch {
		part := reqs[from:min(from+handBatch, len(reqs))]
		fs = append(fs, workflow.ExecuteActivity(handActivityOptions(ctx, part), acts.HandPushes, meshapi.HandPushesInput{Requests: part}))
	}
	var first error
	for _, f := range fs {
		if err := f.Get(ctx, nil); err != nil && first == nil {
			first = err
		}
	}
	return first
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

// plural is one or many, by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tally names the tier's machines that failed and those that refused (or
// were withdrawn), each with its reason.
func tally(tier *meshapi.TierState) (failed, refused []string) {
	for _, m := range tier.Machines {
		switch m.State {
		case meshapi.MachineFailed:
			failed = append(failed, fmt.Sprintf("%s: %s", m.Machine, m.Reason))
		case meshapi.MachineRefused, meshapi.MachineCancelled:
			refused = append(refused, fmt.Sprintf("%s: %s", m.Machine, m.Reason))
		}
	}
	return failed, refused
}

// haltReason says why a tier halted, in the words the plan ends with. A
// tier pushed at once with no budget keeps the words plans always had.
func haltReason(tier *meshapi.TierState, policy meshapi.TierPolicy, batchesLeft bool, problems []string) string {
	if tier.Batches == 0 && policy.MaxFailed == 0 {
		return fmt.Sprintf("tier %d halted, later tiers untouched: %s", tier.Tier, someOf(problems))
	}
	untouched := "later tiers untouched"
	if batchesLeft {
		waiting := 0
		for _, m := range tier.Machines {
			if m.State == meshapi.MachineWaiting {
				waiting++
			}
		}
		untouched = fmt.Sprintf("its %d %s not yet pushed and later tiers untouched", waiting, plural(waiting, "machine", "machines"))
	}
	return fmt.Sprintf("tier %d halted: %d of its %d machines failed, more than the %d it may lose; %s: %s",
		tier.Tier, tier.Failed, len(tier.Machines), policy.MaxFailed, untouched, someOf(problems))
}

// namedInReason is how many machines' problems a plan's reason names; the
// rest it counts.
const namedInReason = 5

// someOf joins the first namedInReason machines' problems and counts the
// rest. A batch of a hundred machines that fail one way must not end a
// plan with a hundred clauses in one line: the person on call reads the
// first few, and plan show lists every machine with its own reason.
func someOf(problems []string) string {
	if len(problems) <= namedInReason {
		return strings.Join(problems, "; ")
	}
	rest := len(problems) - namedInReason
	return fmt.Sprintf("%s; and %d more %s (plan show lists each with its reason)",
		strings.Join(problems[:namedInReason], "; "), rest, plural(rest, "machine", "machines"))
}

// place is where a machine's progress sits in the plan's tiers.
type place struct {
	tier, machine int
	// putBack marks the place's put-back request, rather than its push.
	putBack bool
}

// index lays out byMachine, byRequest and inFlight once the plan's tiers are
// final (after a rollback or a sync narrows them): nothing the plan does
// per answer or per machine walks the fleet after it. Lookups by key are
// deterministic; nothing iterates these maps.
func (p *plan) index() {
	p.byMachine, p.byRequest = map[string]place{}, map[string]place{}
	p.inFlight = make([]int, len(p.st.Tiers))
	for ti, tier := range p.st.Tiers {
		for mi, m := range tier.Machines {
			at := place{tier: ti, machine: mi}
			p.byMachine[m.Machine] = at
			p.byRequest[meshapi.RequestID(p.st.Plan, m.Machine)] = at
			at.putBack = true
			p.byRequest[meshapi.PutBackID(p.st.Plan, m.Machine)] = at
		}
	}
}

// progress is the machine at a place.
func (p *plan) progress(at place) *meshapi.MachineProgress {
	return &p.st.Tiers[at.tier].Machines[at.machine]
}

// send marks tier ti's machine mi as handed a request (its push, or a
// put-back): in flight until its answer.
func (p *plan) send(ti, mi int, state meshapi.MachineStatus) *meshapi.MachineProgress {
	m := &p.st.Tiers[ti].Machines[mi]
	m.State = state
	p.inFlight[ti]++
	return m
}

// take records a machine's answer and shows it in the plan's state at once.
// An answer for a machine no longer being pushed (a repeat), or for a
// request the plan never handed, changes nothing.
func (p *plan) take(r meshapi.PushResult) {
	at, ok := p.byRequest[r.Request]
	if !ok {
		return
	}
	m := p.progress(at)
	switch {
	case !at.putBack && m.State == meshapi.MachinePushing:
		m.State, m.Reason, m.Seq, m.Rebased = r.Outcome, r.Reason, r.Seq, r.Rebased
	case at.putBack && m.State == meshapi.MachineReverting:
		m.Seq = r.Seq
		if r.Outcome == meshapi.MachineConverged || r.Outcome == meshapi.MachineSuperseded {
			m.State, m.Reason = meshapi.MachineReverted, r.Reason
		} else {
			m.State, m.Reason = meshapi.MachineFailed, "could not be put back: "+r.Reason
		}
	default:
		return
	}
	p.inFlight[at.tier]--
}

// note records a reason on a machine that is still waiting, for the UI and
// the CLI to show before its push says more.
func (p *plan) note(machine, reason string) {
	if at, ok := p.byMachine[machine]; ok {
		p.progress(at).Reason = reason
	}
}

// eachMachine calls fn with every machine of every tier, in order.
func (p *plan) eachMachine(fn func(*meshapi.MachineProgress)) {
	for ti := range p.st.Tiers {
		for mi := range p.st.Tiers[ti].Machines {
			fn(&p.st.Tiers[ti].Machines[mi])
		}
	}
}

// tierAnswered says whether every request handed for tier ti has its
// answer (none of its machines is pushing or being put back).
func (p *plan) tierAnswered(ti int) bool {
	return p.inFlight[ti] == 0
}
