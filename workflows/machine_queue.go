package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// recentAnswers bounds how many answers a machine workflow remembers to
// re-answer a re-delivered request.
const recentAnswers = 200

// enqueue takes a request: a duplicate of one waiting or in flight is
// ignored, one already answered is answered again, and a newer build of a
// module supersedes older ones still waiting (newest wins).
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
		if q.Build.Module == r.Build.Module && q.Build.Generation > r.Build.Generation {
			m.answer(ctx, meshapi.ResultOf(r, meshapi.MachineSuperseded, fmt.Sprintf(
				"a newer build of %s (generation %d, plan %s) is already queued for %s", q.Build.Module, q.Build.Generation, q.Plan, m.in.Machine)), false)
			return
		}
	}
	var kept, superseded []meshapi.PushRequest
	for _, q := range m.queue {
		if q.Build.Module == r.Build.Module && q.Build.Generation < r.Build.Generation {
			superseded = append(superseded, q)
		} else {
			kept = append(kept, q)
		}
	}
	m.queue = append(kept, r)
	for _, q := range superseded {
		m.answer(ctx, meshapi.ResultOf(q, meshapi.MachineSuperseded, fmt.Sprintf(
			"superseded while queued on %s by a newer build of %s (generation %d, plan %s)", m.in.Machine, r.Build.Module, r.Build.Generation, r.Plan)), false)
	}
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
		if err := f.Get(gctx, nil); err != nil {
			// The plan is gone (terminated, or ended by an operator); the
			// answer stays in Recent for anyone who asks.
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
