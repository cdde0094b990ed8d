package workflows

import (
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// recentAnswers bounds how many answers a machine workflow remembers to
// re-answer a re-delivered request.
const recentAnswers = 200

// enqueue takes a request: a duplicate of one waiting or in flight is
// ignored, one already answered is answered again, and a newer build of a
// module supersedes older ones still waiting (newest wins; a rollback is
// neither superseded nor supersedes, see spared).
func (m *machine) enqueue(ctx workflow.Context, r meshapi.PushRequest) {
	if r.Machine != m.in.Machine {
		m.answer(ctx, meshapi.ResultOf(r, meshapi.MachineRefused, fmt.Sprintf("request for machine %s reached machine %s", r.Machine, m.in.Machine)), false)
		return
	}
	if m.current != nil && m.current.Request == r.Request {
		return
	}
	for _, q := range m.queue {
		if q.Request == r.Request {
			return
		}
	}
	for _, a := range m.recent {
		if a.Request == r.Request {
			m.answer(ctx, a, false)
			return
		}
	}
	for _, q := range m.queue {
		if q.Build.Module == r.Build.Module && q.Build.Generation > r.Build.Generation && !spared(q, r) {
			m.answer(ctx, meshapi.ResultOf(r, meshapi.MachineSuperseded, fmt.Sprintf(
				"a newer build of %s (generation %d, plan %s) is already queued for %s", q.Build.Module, q.Build.Generation, q.Plan, m.in.Machine)), false)
			return
		}
	}
	var kept, superseded []meshapi.PushRequest
	for _, q := range m.queue {
		if q.Build.Module == r.Build.Module && q.Build.Generation < r.Build.Generation && !spared(q, r) {
			superseded = append(superseded, q)
		} else {
			kept = append(kept, q)
		}
	}
	m.queue = inLine(kept, r)
	for _, q := range superseded {
		m.answer(ctx, meshapi.ResultOf(q, meshapi.MachineSuperseded, fmt.Sprintf(
			"superseded while queued on %s by a newer build of %s (generation %d, plan %s)", m.in.Machine, r.Build.Module, r.Build.Generation, r.Plan)), false)
	}
}

// urgent is whether a request restores a known-good build: a rollback
// plan's push, or the put-back a plan sends after its tier's analysis failed
// (Rollback set, with From). Both undo a push that is doing harm, so both
// go before merge pushes that would only add to it, and their push
// activity carries meshapi.RollbackPriority.
func urgent(r meshapi.PushRequest) bool { return r.Rollback != nil }

// spared says whether newest-wins leaves the pair q, r of one module alone:
// a rollback (urgent) is never superseded by a newer build of its module,
// queued before it or after, and supersedes none: it restores a build
// known good, and a newer build waiting beside it is most often the one it
// undoes. It runs first; what waits behind it is judged when it is sent (a
// build the rollback rejected is refused then), and merges keep
// newest-wins among themselves.
func spared(q, r meshapi.PushRequest) bool { return urgent(q) || urgent(r) }

// inLine puts a request into the queue: last, unless it is urgent, in which
// case it goes after the urgent requests already waiting and before every
// merge push. The push in flight is not in the queue and is never
// interrupted; among equals the queue stays first come, first served.
// Newest-wins (enqueue) is applied before, leaving rollbacks out (see
// spared).
func inLine(queue []meshapi.PushRequest, r meshapi.PushRequest) []meshapi.PushRequest {
	if !urgent(r) {
		return append(queue, r)
	}
	at := 0
	for i, q := range queue {
		if urgent(q) {
			at = i + 1
		}
	}
	return slices.Insert(queue, at, r)
}

// cancel withdraws a waiting request. One already in flight finishes: a
// declaration half-sent is worse than one sent.
func (m *machine) cancel(c meshapi.CancelPush) {
	for i, q := range m.queue {
		if q.Request == c.Request {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			m.remember(meshapi.ResultOf(q, meshapi.MachineCancelled, "withdrawn by its plan: "+c.Reason))
			return
		}
	}
}

// answer is the one place a request's answer is settled: counted,
// remembered for a re-delivered request, and signalled to the plan that
// asked unless the push activity has delivered it already.
func (m *machine) answer(ctx workflow.Context, r meshapi.PushResult, delivered bool) {
	pushAnswered(ctx, m.in.Machine, r.Outcome)
	m.remember(r)
	if delivered {
		return
	}
	m.answering++
	f := workflow.SignalExternalWorkflow(ctx, r.AnswerTo(), "", meshapi.SignalPushResult, r)
	workflow.Go(ctx, func(gctx workflow.Context) {
		defer func() { m.answering-- }()
		err := f.Get(gctx, nil)
		var ended *temporal.UnknownExternalWorkflowExecutionError
		switch {
		case errors.As(err, &ended):
			// Its plan or relay has ended: a relay ends once it has passed
			// on every answer, so a repeat (a request handed over again,
			// a push answered by its activity and then retried) finds it
			// gone, and a plan ended by an operator no longer listens. The
			// answer stays in Recent for anyone who asks.
			workflow.GetLogger(gctx).Info("answer not taken: its plan or relay has ended", "plan", r.Plan, "to", r.AnswerTo())
		case err != nil:
			workflow.GetLogger(gctx).Warn("plan did not take its answer", "plan", r.Plan, "to", r.AnswerTo(), "error", err)
		}
	})
}

func (m *machine) remember(r meshapi.PushResult) {
	m.recent = append(m.recent, r)
	if len(m.recent) > recentAnswers {
		m.recent = append([]meshapi.PushResult(nil), m.recent[len(m.recent)-recentAnswers:]...)
	}
}
