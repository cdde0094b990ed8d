package workflows

import (
	"fmt"
	"maps"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// enrollmentEvents is the history length past which an Enrollment
// continues as new: asks arrive only when an agent's host or labels
// change and decisions only from people, so it is reached rarely, but a
// record that lives for the machine's lifetime must not grow for ever.
const enrollmentEvents = 2000

// Enrollment is a machine's enrollment (package enroll): its agent's ask,
// pending until an operator admits the machine (UpdateEnrollApprove) or
// turns it away (UpdateEnrollDeny). It pushes nothing itself. Its state is
// its search attribute SAEnrollment and its memo, which is how the worker
// learns which machines are admitted (they join its config in force, as a
// machine added to mesh.yaml does) and the starter which are pending. It
// runs as long as the machine is known: a denied machine's agent asking
// again is answered "denied" rather than pending anew, and a deny after an
// approve takes the machine out of the mesh again.
func Enrollment(ctx workflow.Context, in meshapi.Enrollment) error {
	if err := in.Ask.Validate(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrInvalidInput, err)
	}
	e := &enrollment{st: in}
	if e.st.State == "" {
		e.st.State = meshapi.EnrollPending
	}
	if err := e.publish(ctx); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, meshapi.QueryState, func() (meshapi.Enrollment, error) {
		return e.st, nil
	}); err != nil {
		return err
	}
	for _, u := range []struct {
		name string
		to   string
	}{{meshapi.UpdateEnrollApprove, meshapi.EnrollAdmitted}, {meshapi.UpdateEnrollDeny, meshapi.EnrollDenied}} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name,
			func(ctx workflow.Context, d meshapi.EnrollDecision) (meshapi.Enrollment, error) {
				return e.decide(ctx, u.to, d)
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, d meshapi.EnrollDecision) error {
				return e.check(u.to, d)
			}},
		); err != nil {
			return err
		}
	}

	asks := workflow.GetSignalChannel(ctx, meshapi.SignalEnrollAsk)
	for {
		var ask meshapi.EnrollAsk
		more := true
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(asks, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &ask) })
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { more = false })
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > enrollmentEvents || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
		sel.Select(ctx)
		if !more {
			return ctx.Err()
		}
		if err := e.take(ctx, ask); err != nil {
			return err
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	for {
		var ask meshapi.EnrollAsk
		if !asks.ReceiveAsync(&ask) {
			break
		}
		if err := e.take(ctx, ask); err != nil {
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, meshapi.EnrollmentWorkflowType, e.st)
}

// enrollment is an Enrollment's state; its methods are its steps.
type enrollment struct {
	st meshapi.Enrollment
}

// take records an ask: while pending, its host and labels replace the
// ones asked before; once decided, the decision stands for what was asked
// then (the endpoint answers a changed host on an admitted machine with a
// refusal and never signals it), so the ask changes nothing.
func (e *enrollment) take(ctx workflow.Context, ask meshapi.EnrollAsk) error {
	if e.st.State != meshapi.EnrollPending || ask.Validate() != nil || ask.Machine != e.st.Ask.Machine {
		return nil
	}
	if ask.Host == e.st.Ask.Host && maps.Equal(ask.Labels, e.st.Ask.Labels) {
		return nil
	}
	e.st.Ask = ask
	return e.publish(ctx)
}

// check refuses a decision that would change nothing or says no one made
// it, before it is recorded.
func (e *enrollment) check(to string, d meshapi.EnrollDecision) error {
	if err := d.Validate(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrInvalidInput, err)
	}
	if e.st.State == to {
		msg := fmt.Sprintf("machine %s is already %s", e.st.Ask.Machine, to)
		if e.st.Decided != nil {
			msg += fmt.Sprintf(" (by %s at %s)", e.st.Decided.By, e.st.DecidedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
		return temporal.NewNonRetryableApplicationError(msg, meshapi.ErrEnrollDecided, nil)
	}
	return nil
}

// decide records the decision d, putting the enrollment in state to.
func (e *enrollment) decide(ctx workflow.Context, to string, d meshapi.EnrollDecision) (meshapi.Enrollment, error) {
	e.st.State, e.st.Decided, e.st.DecidedAt = to, &d, workflow.Now(ctx)
	if err := e.publish(ctx); err != nil {
		return meshapi.Enrollment{}, err
	}
	return e.st, nil
}

// publish puts the state where listings read it: the search attribute and
// the memo.
func (e *enrollment) publish(ctx workflow.Context) error {
	if err := workflow.UpsertTypedSearchAttributes(ctx, meshapi.SAEnrollment.ValueSet(e.st.State)); err != nil {
		return err
	}
	return workflow.UpsertMemo(ctx, map[string]any{meshapi.MemoEnrollment: e.st})
}
