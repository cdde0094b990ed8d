package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

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
	var parts [][]meshapi.PushRequest
	for from := 0; from < len(reqs); from += handBatch {
		parts = append(parts, reqs[from:min(from+handBatch, len(reqs))])
	}
	hand := func(ctx workflow.Context, part []meshapi.PushRequest) workflow.Future {
		return workflow.ExecuteActivity(handActivityOptions(ctx, part), acts.HandPushes, meshapi.HandPushesInput{Requests: part})
	}
	errs := make([]error, len(parts))
	if len(parts) > 1 && workflow.GetVersion(ctx, changePlanHandApart, workflow.DefaultVersion, 1) >= 1 {
		// Each part in a coroutine of its own, which encodes its input
		// (see changePlanHandApart).
		handed := make([]workflow.Future, len(parts))
		for i, part := range parts {
			f, settle := workflow.NewFuture(ctx)
			workflow.Go(ctx, func(ctx workflow.Context) {
				errs[i] = hand(ctx, part).Get(ctx, nil)
				settle.SetValue(nil)
			})
			handed[i] = f
		}
		for _, f := range handed {
			_ = f.Get(ctx, nil) // settled with no error: the part's is in errs
		}
	} else {
		fs := make([]workflow.Future, len(parts))
		for i, part := range parts {
			fs[i] = hand(ctx, part)
		}
		for i, f := range fs {
			errs[i] = f.Get(ctx, nil)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err // the first part's that failed
		}
	}
	return nil
}

// relayed says whether the plan's answers are relayed, once its tiers are
// final: a plan of more than push.relay_above machines (as its targets
// said) hears its answers through relays.
func (p *plan) relayed() bool {
	n := 0
	for _, t := range p.st.Tiers {
		n += len(t.Machines)
	}
	return meshapi.Relayed(n, p.relayAbove)
}

// startRelays, when the plan's answers are relayed, starts a relay for
// every RelaySize requests of a hand-over and names it in their ReplyTo,
// before any is handed over: an answer has somewhere to go as soon as it
// is given. The plan waits for its relays to end as well as for their
// answers (see hand), so that none is left to be terminated with it. A
// relay that ends short of its answers (terminated by hand) sets
// relayLost, which halts the plan rather than leave it waiting.
func (p *plan) startRelays(ctx workflow.Context, reqs []meshapi.PushRequest) error {
	if !p.relays {
		return nil
	}
	var started []workflow.Future
	for from := 0; from < len(reqs); from += meshapi.RelaySize {
		part := reqs[from:min(from+meshapi.RelaySize, len(reqs))]
		id := meshapi.RelayID(p.st.Plan, p.relaysStarted)
		p.relaysStarted++
		in := meshapi.RelayInput{Plan: p.st.Plan}
		for i := range part {
			part[i].ReplyTo = id
			in.Requests = append(in.Requests, part[i].Request)
		}
		// The plan's own context: a relay lives until its answers are
		// passed on, whatever step started it.
		f := workflow.ExecuteChildWorkflow(relayOptions(p.ctx, id, part), meshapi.RelayWorkflowType, in)
		started = append(started, f.GetChildWorkflowExecution())
		p.relaysOpen++
		workflow.Go(p.ctx, func(gctx workflow.Context) {
			err := f.Get(gctx, nil)
			p.relaysOpen--
			if err != nil && p.relayLost == "" {
				p.relayLost = fmt.Sprintf("the relay of %d machines' answers (%s) ended before passing them all on (%s)",
					len(in.Requests), id, errorReason(err))
			}
		})
	}
	for _, s := range started {
		if err := s.Get(ctx, nil); err != nil {
			return fmt.Errorf("start a relay of the machines' answers: %w", err)
		}
	}
	return nil
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
	if !ok || !p.waiting(at) {
		return
	}
	m := p.progress(at)
	switch {
	case !at.putBack:
		m.State, m.Reason, m.Seq, m.Rebased = r.Outcome, r.Reason, r.Seq, r.Rebased
	case r.Outcome == meshapi.MachineConverged || r.Outcome == meshapi.MachineSuperseded:
		m.State, m.Reason, m.Seq = meshapi.MachineReverted, r.Reason, r.Seq
	default:
		m.State, m.Reason, m.Seq = meshapi.MachineFailed, "could not be put back: "+r.Reason, r.Seq
	}
	p.inFlight[at.tier]--
	p.unshown++
}

// waiting says whether the machine at at still waits for the answer to
// the request that put it there.
func (p *plan) waiting(at place) bool {
	state := p.progress(at).State
	if at.putBack {
		return state == meshapi.MachineReverting
	}
	return state == meshapi.MachinePushing
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
