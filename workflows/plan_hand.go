package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

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
	}
	// Its machines were just marked pushing or reverting (send): show it
	// before they answer.
	p.showDetails(ctx)
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
