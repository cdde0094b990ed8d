package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// Relay takes the answers to one hand-over's requests, alone or in the
// bundles of a worker (PushRequest.Bundles), and passes them on to
// its plan in bundles (see meshapi.RelayAbove for why a large plan has
// relays): a bundle as soon as RelayBundle answers wait, what waits once
// the first of it has waited RelayWait (RelayWaits times at most), and the
// rest with the last answer. It ends once every request has its answer
// passed on, or when its plan ends (it is the plan's child, terminated
// with it). An answer it did not wait for, or a repeat, is dropped, as the
// plan would drop it.
func Relay(ctx workflow.Context, in meshapi.RelayInput) (meshapi.RelayResult, error) {
	r := &relay{in: in, left: map[string]bool{}}
	for _, id := range in.Requests {
		r.left[id] = true
	}
	answers := workflow.GetSignalChannel(ctx, meshapi.SignalPushResult)
	bundles := workflow.GetSignalChannel(ctx, meshapi.SignalPushResults)
	var wait workflow.Future
	var stopWait workflow.CancelFunc
	for len(r.left) > 0 {
		waited := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(answers, func(workflow.ReceiveChannel, bool) {})
		sel.AddReceive(bundles, func(workflow.ReceiveChannel, bool) {})
		if wait != nil {
			sel.AddFuture(wait, func(workflow.Future) { waited = true })
		}
		sel.Select(ctx)
		r.holdAll(answers, bundles)
		switch {
		case len(r.held) >= meshapi.RelayBundle || len(r.left) == 0 || waited:
			if stopWait != nil {
				stopWait()
			}
			wait, stopWait = nil, nil
			if waited {
				r.waits++
			}
			if !r.pass(ctx) {
				return r.res, nil
			}
		case len(r.held) > 0 && wait == nil && r.waits < meshapi.RelayWaits:
			var wctx workflow.Context
			wctx, stopWait = workflow.WithCancel(ctx)
			wait = workflow.NewTimer(wctx, meshapi.RelayWait)
		}
	}
	return r.res, nil
}

// relay is one Relay run's state.
type relay struct {
	in meshapi.RelayInput
	// left is the requests whose answer has not come; held, the answers
	// not yet passed on. Nothing iterates left: lookups are deterministic.
	left  map[string]bool
	held  []meshapi.PushResult
	waits int
	res   meshapi.RelayResult
}

// holdAll holds every answer that has come, alone or in a bundle (from the
// workers that answer many at once, see meshapi.AnswerBundle).
func (r *relay) holdAll(answers, bundles workflow.ReceiveChannel) {
	for {
		var a meshapi.PushResult
		if !answers.ReceiveAsync(&a) {
			break
		}
		r.hold(a)
	}
	for {
		var b meshapi.PushResults
		if !bundles.ReceiveAsync(&b) {
			break
		}
		for _, a := range b.Results {
			r.hold(a)
		}
	}
}

// hold keeps an answer the relay waits for until it is passed on.
func (r *relay) hold(a meshapi.PushResult) {
	if !r.left[a.Request] {
		return
	}
	delete(r.left, a.Request)
	r.held = append(r.held, a)
}

// pass signals the held answers to the plan in one bundle. It is false when
// the plan is gone (ended, or ended by an operator): nothing waits for the
// rest then.
func (r *relay) pass(ctx workflow.Context) bool {
	if len(r.held) == 0 {
		return true
	}
	b := meshapi.PushResults{Results: r.held}
	r.held = nil
	if err := workflow.SignalExternalWorkflow(ctx, r.in.Plan, "", meshapi.SignalPushResults, b).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("plan did not take its answers", "plan", r.in.Plan, "answers", len(b.Results), "error", err)
		return false
	}
	r.res.Answers += len(b.Results)
	r.res.Bundles++
	return true
}
