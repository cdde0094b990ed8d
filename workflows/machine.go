package workflows

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Machine is a machine's long-running workflow, the only writer to its host.
// It is started on first use by signal-with-start and lives across
// continue-as-new, carrying its last sequence, its queue and its recent
// answers.
//
// Its loop is here; how requests queue, supersede and are answered is in
// machine_queue.go, and how it continues as new in machine_continue.go.
func Machine(ctx workflow.Context, in meshapi.MachineInput) error {
	m := &machine{
		in:      in,
		lastSeq: in.LastSeq,
		queue:   append([]meshapi.PushRequest(nil), in.Queue...),
		recent:  append([]meshapi.PushResult(nil), in.Recent...),
		floor:   maps.Clone(in.Floor),
		running: in.Running,
		retired: in.Retired,
	}
	// The run starts with the change time its starter set (the plan's
	// hand-over, as it starts the workflow) or the run before it left.
	m.changedAt, _ = workflow.GetTypedSearchAttributes(ctx).GetTime(meshapi.SAMachineChanged)
	if err := m.setup(ctx); err != nil {
		return err
	}
	return m.run(ctx)
}

// machine is one machine workflow's state; its methods are its steps.
type machine struct {
	in      meshapi.MachineInput
	lastSeq uint64
	queue   []meshapi.PushRequest
	current *meshapi.PushRequest
	recent  []meshapi.PushResult
	handled int
	// signals counts the requests and withdrawals this run has taken: the
	// server refuses a run's signals past its limit (see signalBudget).
	signals int
	// answering counts answers signalled to plans and not yet delivered;
	// continue-as-new waits for them.
	answering int
	// floor is this workflow's own record, per module, of the newest
	// container that ran healthy on the machine: the floor's second home,
	// which a host that loses its state cannot take with it.
	floor map[string]mesh.Container
	// hostLostState is the last push's word that the host had lost its
	// state, for the machine's state query.
	hostLostState string
	// running is the last declaration a push of this workflow found
	// running healthy (sent, or already there): what the machine runs by
	// this workflow's record, for its details and query.
	running *mesh.Declaration
	// budgetWait says the push in flight waits for the fleet budget, and
	// behind whom (machine_budget.go).
	budgetWait string
	// published is the summary last kept in the memo (machine_summary.go).
	published *meshapi.MachineSummary
	// changedAt is meshapi.SAMachineChanged as the run last set it, or as
	// it started with.
	changedAt time.Time
	// retired is why the machine left the mesh config, once the worker
	// said so: the workflow ends when its queue is empty (machine_continue.go).
	retired *meshapi.Retire
}

func (m *machine) setup(ctx workflow.Context) error {
	budget := meshapi.FleetBudgetID(workflow.GetInfo(ctx).TaskQueueName)
	return workflow.SetQueryHandler(ctx, meshapi.QueryState, func() (meshapi.MachineState, error) {
		s := m.state()
		if s.BudgetWait != "" {
			s.BudgetWorkflow = budget
		}
		return s, nil
	})
}

func (m *machine) state() meshapi.MachineState {
	s := meshapi.MachineState{Machine: m.in.Machine, LastSeq: m.lastSeq, Queue: []meshapi.QueuedRequest{}, Recent: m.recent,
		Floor: m.floor, HostLostState: m.hostLostState, Running: m.running, BudgetWait: m.budgetWait}
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
	return meshapi.QueuedRequest{Request: r.Request, Plan: r.Plan, Module: r.Build.Module, Digest: r.Build.Digest, Generation: r.Build.Generation,
		Rollback: urgent(r)}
}

// run takes requests and withdrawals as they come and pushes the queue's
// head, one push at a time: the one-writer rule.
func (m *machine) run(ctx workflow.Context) error {
	pushCh := workflow.GetSignalChannel(ctx, meshapi.SignalPush)
	cancelCh := workflow.GetSignalChannel(ctx, meshapi.SignalCancelPush)
	retireCh := workflow.GetSignalChannel(ctx, meshapi.SignalRetire)
	var inflight workflow.Future
	for {
		if inflight == nil && m.retired != nil && len(m.queue) == 0 {
			if done, err := m.retire(ctx, pushCh, cancelCh); done {
				return err
			}
		}
		if inflight == nil && m.shouldContinue(ctx) {
			return m.continueAsNew(ctx, pushCh, cancelCh)
		}
		if inflight == nil && len(m.queue) > 0 {
			inflight = m.pushNext(ctx)
		}

		sel := workflow.NewSelector(ctx)
		sel.AddReceive(pushCh, func(c workflow.ReceiveChannel, _ bool) {
			var r meshapi.PushRequest
			c.Receive(ctx, &r)
			m.signals++
			m.enqueue(ctx, r)
		})
		sel.AddReceive(cancelCh, func(c workflow.ReceiveChannel, _ bool) {
			var r meshapi.CancelPush
			c.Receive(ctx, &r)
			m.signals++
			m.cancel(r)
		})
		sel.AddReceive(retireCh, func(c workflow.ReceiveChannel, _ bool) {
			var r meshapi.Retire
			c.Receive(ctx, &r)
			m.signals++
			if m.retired == nil {
				m.retired = &r
			}
		})
		if inflight != nil {
			f := inflight
			sel.AddFuture(f, func(workflow.Future) {
				m.finish(ctx, f)
				inflight = nil
			})
		}
		queueLength(ctx, m.in.Machine, len(m.queue))
		m.details(ctx)
		if !sel.HasPending() {
			// Only before the workflow waits: a turn that goes on at once
			// (a signal already here) settles on more first.
			m.publish(ctx)
		}
		sel.Select(ctx)
	}
}

// pushNext starts the push of the queue's head with the next sequence: a
// regular activity, or a local activity run in this workflow task when the
// request asks for one. The request's word (the handing worker's
// push.local_activity, in the history as the signal that brought it), not
// this worker's config, chooses, so that a history replays to the commands
// it recorded and turning the setting on or off reaches every machine
// workflow at its next push.
func (m *machine) pushNext(ctx workflow.Context) workflow.Future {
	req := m.queue[0]
	m.queue = m.queue[1:]
	m.current = &req
	// The floor is the push's own copy: a local activity is handed its
	// input as it is, not encoded, and one that outlives its timeout may
	// still read it while finish raises the workflow's floor.
	in := meshapi.PushInput{Request: req, Seq: m.lastSeq + 1, Floor: maps.Clone(m.floor)}
	summary := fmt.Sprintf("push %s %s (generation %d) for %s", req.Build.Module, mesh.ShortDigest(req.Build.Digest), req.Build.Generation, req.Plan)
	if req.Budget != nil {
		return m.pushLeased(ctx, req, func(ctx workflow.Context) workflow.Future { return m.startPush(ctx, req, in, summary) })
	}
	return m.startPush(ctx, req, in, summary)
}

// startPush starts the push activity of req, local or regular as the
// request asks.
func (m *machine) startPush(ctx workflow.Context, req meshapi.PushRequest, in meshapi.PushInput, summary string) workflow.Future {
	if req.Local {
		return workflow.ExecuteLocalActivity(localPushOptions(ctx, req.Policy.WithDefaults(), summary), acts.PushAndAnswer, in)
	}
	actx := pushOptions(ctx, req.Policy.WithDefaults(), summary)
	if urgent(req) {
		actx = workflow.WithPriority(actx, temporal.Priority{PriorityKey: meshapi.RollbackPriority})
	}
	return workflow.ExecuteActivity(actx, acts.PushAndAnswer, in)
}

// finish turns the push activity's outcome into the plan's answer. A push
// the activity carried through it has answered itself; a failed one is
// answered from here.
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
	res := meshapi.ResultOf(req, out.Outcome, out.Reason)
	res.Rebased = out.Rebased
	if out.Seq > m.lastSeq {
		m.lastSeq = out.Seq
	}
	res.Seq = out.Seq
	if out.Left && m.retired == nil {
		m.retired = &meshapi.Retire{Reason: out.Reason}
	}
	if out.HostLostState != "" {
		m.hostLostState = out.HostLostState
		hostStateLost(ctx, m.in.Machine)
	}
	if err == nil && out.Outcome == meshapi.MachineConverged {
		if out.Sent {
			m.raiseFloor(out.Declaration)
		}
		if len(out.Declaration.Containers) > 0 {
			d := out.Declaration
			m.running = &d
		}
	}
	m.answer(ctx, res, err == nil)
}

// raiseFloor records the containers of a declaration that has just been
// healthy for its MinHealthy: each module's floor is the newest of them
// that ever was. A container the catalogue did not know (generation 0)
// raises nothing. A rollback's declaration sets the floor where it put the
// machine, lower or not: the one sanctioned downgrade, which the floor
// follows as the host's does.
func (m *machine) raiseFloor(d mesh.Declaration) {
	for _, c := range d.Containers {
		if f, ok := m.floor[c.Module]; c.Generation > 0 && (!ok || c.Generation > f.Generation || d.Rollback) {
			if m.floor == nil {
				m.floor = map[string]mesh.Container{}
			}
			m.floor[c.Module] = c
		}
	}
}
