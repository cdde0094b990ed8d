package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// signalBudget is how many signals a machine workflow run takes before it
// continues as new. The server refuses a run's signals past 10,000
// (history.maximumSignalsPerExecution), and its continue-as-new suggestion
// counts events and bytes, not signals (temporalio/temporal#10941); a run
// continues only between pushes, so the half left over is for the signals
// that arrive while the push in flight when the budget is reached ends.
const signalBudget = 5000

// shouldContinue says whether the machine workflow should continue as new
// now: when the server suggests it (the history grows large), when the run
// has taken its budget of signals, or after MachineInput.ContinueAfter
// requests.
func (m *machine) shouldContinue(ctx workflow.Context) bool {
	if m.in.ContinueAfter > 0 && m.handled >= m.in.ContinueAfter {
		return true
	}
	return m.signals >= signalLimit(m.in.SignalBudget) || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// signalLimit is the signals a run takes before it continues as new:
// signalBudget, or a test's smaller override.
func signalLimit(override int) int {
	if override > 0 {
		return override
	}
	return signalBudget
}

// continueAsNew waits for answers in flight, takes every signal already
// delivered into the queue, and continues with the sequence, queue and
// recent answers, so that no request is lost or answered twice.
func (m *machine) continueAsNew(ctx workflow.Context, pushCh, cancelCh workflow.ReceiveChannel) error {
	if err := m.settle(ctx, pushCh, cancelCh); err != nil {
		return err
	}
	if m.answering > 0 {
		// Draining answered a duplicate or superseded a request; deliver
		// those answers first, then look again.
		return m.continueAsNew(ctx, pushCh, cancelCh)
	}
	next := meshapi.MachineInput{
		Machine:       m.in.Machine,
		LastSeq:       m.lastSeq,
		Queue:         m.queue,
		Recent:        m.recent,
		ContinueAfter: m.in.ContinueAfter,
		SignalBudget:  m.in.SignalBudget,
		Floor:         m.floor,
		Running:       m.running,
		Retired:       m.retired,
	}
	return workflow.NewContinueAsNewError(ctx, meshapi.MachineWorkflowType, next)
}

// retire ends a retired machine's workflow (done) once its answers are
// delivered and no request has come meanwhile; a request that did is
// served first, and retire is asked again when the queue is empty.
func (m *machine) retire(ctx workflow.Context, pushCh, cancelCh workflow.ReceiveChannel) (done bool, err error) {
	if err := m.settle(ctx, pushCh, cancelCh); err != nil {
		return true, err
	}
	if m.answering > 0 || len(m.queue) > 0 {
		return false, nil
	}
	workflow.GetLogger(ctx).Info("machine workflow ends: its machine left the mesh config", "machine", m.in.Machine, "reason", m.retired.Reason)
	return true, nil
}

// settle waits for answers in flight and takes every signal already
// delivered into the queue, so that the run can end with nothing lost.
func (m *machine) settle(ctx workflow.Context, pushCh, cancelCh workflow.ReceiveChannel) error {
	if err := workflow.Await(ctx, func() bool { return m.answering == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
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
	var r meshapi.Retire
	if workflow.GetSignalChannel(ctx, meshapi.SignalRetire).ReceiveAsync(&r) && m.retired == nil {
		m.retired = &r
	}
	return nil
}
