package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// shouldContinue says whether the machine workflow should continue as new
// now: when the server suggests it (the history grows large), or after
// MachineInput.ContinueAfter requests.
func (m *machine) shouldContinue(ctx workflow.Context) bool {
	if m.in.ContinueAfter > 0 && m.handled >= m.in.ContinueAfter {
		return true
	}
	return workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// continueAsNew waits for answers in flight, takes every signal already
// delivered into the queue, and continues with the sequence, queue and
// recent answers, so that no request is lost or answered twice.
func (m *machine) continueAsNew(ctx workflow.Context, pushCh, cancelCh workflow.ReceiveChannel) error {
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
		Floor:         m.floor,
		Running:       m.running,
		LocalPush:     m.in.LocalPush,
	}
	return workflow.NewContinueAsNewError(ctx, meshapi.MachineWorkflowType, next)
}
