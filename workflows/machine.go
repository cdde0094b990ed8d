package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// recentAnswers bounds how many answers a machine workflow remembers to
// re-answer a re-delivered request.
const recentAnswers = 200

// Machine is a machine's long-running workflow, the only writer to its host.
// It is started on first use by signal-with-start and lives across
// continue-as-new, carrying its last sequence, its queue and its recent
// answers.
func Machine(ctx workflow.Context, in meshapi.MachineInput) error {
	m := &machine{
		in:      in,
		lastSeq: in.LastSeq,
		queue:   append([]meshapi.PushRequest(nil), in.Queue...),
		recent:  append([]meshapi.PushResult(nil), in.Recent...),
	}
	if err := m.setup(ctx); err != nil {
		return err
	}
	return m.run(ctx)
}

type machine struct {
	in      meshapi.MachineInput
	lastSeq uint64
	queue   []meshapi.PushRequest
	current *meshapi.PushRequest
	recent  []meshapi.PushResult
	handled int
	// answering counts answers signalled to plans and not yet delivered;
	// continue-as-new waits for them.
	answering int
}

func (m *machine) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, meshapi.QueryState, func() (meshapi.MachineState, error) {
		return m.state(), nil
	})
}

func (m *machine) state() meshapi.MachineState {
	s := meshapi.MachineState{Machine: m.in.Machine, LastSeq: m.lastSeq, Queue: []meshapi.QueuedRequest{}, Recent: m.recent}
	if m.current != nil {
		q := queued(*m.current)
		s.Current = &q
	}
	for _, r := range m.queue {
		s.Queue = append(s.Queue, queued(r))
	}
	return s
}

func queued(r meshapi.PushRequest) meshapi.QueuedRequest {
	return meshapi.QueuedRequest{Request: r.Request, Plan: r.Plan, Module: r.Build.Module, Digest: r.Build.Digest, Generation: r.Build.Generation}
}

func (m *machine) run(ctx workflow.Context) error {
	pushCh := workflow.GetSignalChannel(ctx, meshapi.SignalPush)
	cancelCh := workflow.GetSignalChannel(ctx, meshapi.SignalCancelPush)
	var inflight workflow.Future

	for {
		if inflight == nil && m.shouldContinue(ctx) {
			return m.continueAsNew(ctx, pushCh, cancelCh)
		}
		if inflight == nil && len(m.queue) > 0 {
			req := m.queue[0]
			m.queue = m.queue[1:]
			m.current = &req
			actx := pushOptions(ctx, req.Policy.WithDefaults(),
				fmt.Sprintf("push %s %s (generation %d) for %s", req.Build.Module, short(req.Build.Digest), req.Build.Generation, req.Plan))
			inflight = workflow.ExecuteActivity(actx, acts.Push, meshapi.PushInput{Request: req, Seq: m.lastSeq + 1})
		}

		sel := workflow.NewSelector(ctx)
		sel.AddReceive(pushCh, func(c workflow.ReceiveChannel, _ bool) {
			var r meshapi.PushRequest
			c.Receive(ctx, &r)
			m.enqueue(ctx, r)
		})
		sel.AddReceive(cancelCh, func(c workflow.ReceiveChannel, _ bool) {
			var r meshapi.CancelPush
			c.Receive(ctx, &r)
			m.cancel(r)
		})
		if inflight != nil {
			f := inflight
			sel.AddFuture(f, func(workflow.Future) {
				m.finish(ctx, f)
				inflight = nil
			})
		}
		queueLength(ctx, m.in.Machine, len(m.queue))
		sel.Select(ctx)
	}
}

// enqueue takes a request: a duplicate of one waiting or in flight is
// ignored, one already answered is answered again, and a newer build of a
// module supersedes older ones still waiting (newest wins).
func (m *machine) enqueue(ctx workflow.Context, r meshapi.PushRequest) {
	if r.Machine != m.in.Machine {
		m.answer(ctx, result(r, meshapi.MachineRefused, fmt.Sprintf("request for machine %s reached machine %s", r.Machine, m.in.Machine)))
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
			m.answer(ctx, a)
			return
		}
	}
	for _, q := range m.queue {
		if q.Build.Module == r.Build.Module && q.Build.Generation > r.Build.Generation {
			m.answer(ctx, result(r, meshapi.MachineSuperseded, fmt.Sprintf(
				"a newer build of %s (generation %d, plan %s) is already queued for %s", q.Build.Module, q.Build.Generation, q.Plan, m.in.Machine)))
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
		m.answer(ctx, result(q, meshapi.MachineSuperseded, fmt.Sprintf(
			"superseded while queued on %s by a newer build of %s (generation %d, plan %s)", m.in.Machine, r.Build.Module, r.Build.Generation, r.Plan)))
	}
}

// cancel withdraws a waiting request. One already in flight finishes: a
// declaration half-sent is worse than one sent.
func (m *machine) cancel(c meshapi.CancelPush) {
	for i, q := range m.queue {
		if q.Request == c.Request {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			m.remember(result(q, meshapi.MachineCancelled, "withdrawn by its plan: "+c.Reason))
			return
		}
	}
}

// finish turns the push activity's outcome into the plan's answer.
func (m *machine) finish(ctx workflow.Context, f workflow.Future) {
	req := *m.current
	m.current = nil
	m.handled++
	var out meshapi.PushOutcome
	err := f.Get(ctx, &out)
	if err != nil {
		outcome := meshapi.MachineFailed
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.NonRetryable() && appErr.HasDetails() && appErr.Details(&out) == nil &&
			out.Outcome == meshapi.MachineRefused {
			outcome = meshapi.MachineRefused
			pushRefused(ctx, m.in.Machine, appErr.Type())
		}
		out.Outcome, out.Reason = outcome, errorReason(err)
	}
	res := result(req, out.Outcome, out.Reason)
	res.Rebased = out.Rebased
	if out.Seq > m.lastSeq {
		m.lastSeq = out.Seq
	}
	res.Seq = out.Seq
	m.answer(ctx, res)
}

// answer signals the result to the plan that asked and remembers it.
func (m *machine) answer(ctx workflow.Context, r meshapi.PushResult) {
	pushAnswered(ctx, m.in.Machine, r.Outcome)
	m.remember(r)
	m.answering++
	f := workflow.SignalExternalWorkflow(ctx, r.Plan, "", meshapi.SignalPushResult, r)
	workflow.Go(ctx, func(gctx workflow.Context) {
		defer func() { m.answering-- }()
		if err := f.Get(gctx, nil); err != nil {
			// The plan is gone (terminated, or ended by an operator); the
			// answer stays in Recent for anyone who asks.
			workflow.GetLogger(gctx).Warn("plan did not take its answer", "plan", r.Plan, "error", err)
		}
	})
}

func (m *machine) remember(r meshapi.PushResult) {
	m.recent = append(m.recent, r)
	if len(m.recent) > recentAnswers {
		m.recent = append([]meshapi.PushResult(nil), m.recent[len(m.recent)-recentAnswers:]...)
	}
}

func (m *machine) shouldContinue(ctx workflow.Context) bool {
	if m.in.ContinueAfter > 0 && m.handled >= m.in.ContinueAfter {
		return true
	}
	return workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// continueAsNew waits for answers in flight, takes every signal already
// delivered into the queue, and continues with the sequence, queue and
// recent answers, so that no request is lost or answered twice.
func (m *machine) continueAsNew(ctx workflow.Context, chans ...workflow.ReceiveChannel) error {
	if err := workflow.Await(ctx, func() bool { return m.answering == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	pushCh, cancelCh := chans[0], chans[1]
	for {
		var r meshapi.PushRequest
		if !pushCh.ReceiveAsync(&r) {
			break
		}
		m.enqueue(ctx, r)
	}
	for {
		var c meshapi.CancelPush
		if !cancelCh.ReceiveAsync(&c) {
			break
		}
		m.cancel(c)
	}
	if m.answering > 0 {
		// Draining answered a duplicate or superseded a request; deliver
		// those answers first, then look again.
		return m.continueAsNew(ctx, chans...)
	}
	next := meshapi.MachineInput{
		Machine:       m.in.Machine,
		LastSeq:       m.lastSeq,
		Queue:         m.queue,
		Recent:        m.recent,
		ContinueAfter: m.in.ContinueAfter,
	}
	return workflow.NewContinueAsNewError(ctx, meshapi.MachineWorkflowType, next)
}

func result(r meshapi.PushRequest, outcome, reason string) meshapi.PushResult {
	return meshapi.PushResult{Request: r.Request, Plan: r.Plan, Machine: r.Machine, Outcome: outcome, Reason: reason}
}

// errorReason is the most useful message of an activity failure: the retry
// budget running out says so, with the last failure's message.
func errorReason(err error) string {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if cause := errors.Unwrap(timeout); cause != nil {
			return "gave up after the retry budget: " + errorReason(cause)
		}
		return "gave up after the retry budget: " + timeout.Message()
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19]
	}
	return digest
}
