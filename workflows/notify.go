package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// announceState announces the plan's state once each time it changes (a
// second gate, at another tier, is another event: the plan pushed in
// between): the one place the plan's states become events. A state no
// target can ask for (building, pushing, paused, superseded) says
// nothing.
func (p *plan) announceState(ctx workflow.Context) {
	if !p.notifies || p.st.State == p.announced {
		return
	}
	p.announced = p.st.State
	switch p.st.State {
	case meshapi.PlanGated:
		if p.analysisGate >= 0 {
			p.announce(ctx, meshapi.EventAnalysisInconclusive, p.now, meshapi.ApproveCommand(p.st.Plan, -1))
			return
		}
		p.announce(ctx, meshapi.EventPlanGated, p.now, meshapi.ApproveCommand(p.st.Plan, p.gate))
	case meshapi.PlanHeld:
		p.announce(ctx, meshapi.EventPlanHeld, p.now, "")
	case meshapi.PlanHalted:
		p.announce(ctx, meshapi.EventPlanHalted, p.st.Reason, "")
	case meshapi.PlanRefused:
		p.announce(ctx, meshapi.EventPlanRefused, p.st.Reason, "")
	case meshapi.PlanAborted:
		p.announce(ctx, meshapi.EventPlanAborted, p.st.Reason, "")
	case meshapi.PlanConverged:
		if p.in.Rollback != nil {
			p.announce(ctx, meshapi.EventPlanRolledBack, p.st.Reason, "")
			return
		}
		p.announce(ctx, meshapi.EventPlanConverged, p.st.Reason, "")
	}
}

// announce hands one event, in the plan's words, to the Notifier of every
// target that wants it (the Notify local activity, a signal-with-start
// each). The plan waits for the hand-over only, never for a delivery; one
// that fails is logged and the plan goes on.
func (p *plan) announce(ctx workflow.Context, event, reason, command string) {
	if !p.notifies {
		return
	}
	p.events++
	e := meshapi.NotifyEvent{
		Event: event, Sequence: p.events, Plan: p.st.Plan, Module: p.in.Module, Commit: p.st.Commit,
		State: p.st.State, Reason: reason, Command: command,
	}
	// Disconnected: a plan ending because it was cancelled still says so.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	lctx := workflow.WithLocalActivityOptions(dctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
		Summary:                "notify " + event,
	})
	if err := workflow.ExecuteLocalActivity(lctx, acts.Notify, meshapi.NotifyInput{Event: e}).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not hand a notification over; the plan goes on", "event", e.Key(), "error", err)
	}
}

// Notifier delivers one plan's events to one notify target, in the order
// the plan sent them (signals, see the Notify activity), each until the
// target answers 2xx, with backoff: a target that is down delays only its
// own deliveries, never the plan nor the other targets. It ends once it
// has delivered everything it was given; the plan's next event starts it
// again. A target that keeps failing shows in its details and in the
// meshroll_notifications metric.
func Notifier(ctx workflow.Context, in meshapi.NotifierInput) error {
	ch := workflow.GetSignalChannel(ctx, meshapi.SignalNotify)
	var e meshapi.NotifyEvent
	for ch.ReceiveAsync(&e) {
		if err := deliver(ctx, in.Target, in.Retry.WithDefaults(), e); err != nil {
			return err
		}
	}
	return nil
}

// deliver tries e at target until it is delivered, the target is gone
// from the config, or retry.GiveUp has passed; each try is one activity
// attempt, so that the workflow sees every failure and shows it. The plan
// is told when the event first fails, when it is abandoned and when it is
// delivered after failing (tellPlan).
func deliver(ctx workflow.Context, target string, retry meshapi.NotifyRetry, e meshapi.NotifyEvent) error {
	start := workflow.Now(ctx)
	wait := retry.First
	trouble := meshapi.NotifyTrouble{Target: target, Event: e.Key()}
	for attempt := 1; ; attempt++ {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
			Summary:             fmt.Sprintf("deliver %s to %s (try %d)", e.Event, target, attempt),
		})
		err := workflow.ExecuteActivity(actx, acts.Deliver, meshapi.DeliverInput{Target: target, Event: e, Attempt: attempt}).Get(ctx, nil)
		if err == nil {
			notified(ctx, target, e.Event, "delivered")
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** delivered %s to %s (try %d)", e.Plan, e.Key(), target, attempt))
			if attempt > 1 {
				trouble.Outcome, trouble.Error = meshapi.NotifyRecovered, ""
				tellPlan(ctx, e.Plan, trouble)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		trouble.Error = errorReason(err)
		if attempt == 1 {
			trouble.Since = workflow.Now(ctx)
		}
		var app *temporal.ApplicationError
		gone := errors.As(err, &app) && app.NonRetryable()
		if gone || workflow.Now(ctx).Sub(start) >= retry.GiveUp {
			notified(ctx, target, e.Event, "abandoned")
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** gave up on %s to %s after %d tries: %s", e.Plan, e.Key(), target, attempt, trouble.Error))
			workflow.GetLogger(ctx).Warn("notification abandoned", "target", target, "event", e.Key(), "tries", attempt, "error", err)
			trouble.Outcome = meshapi.NotifyAbandoned
			tellPlan(ctx, e.Plan, trouble)
			return nil
		}
		notified(ctx, target, e.Event, "failed")
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** target %s is failing: %d %s of %s, the last: %s; next try in %s",
			e.Plan, target, attempt, plural(attempt, "try", "tries"), e.Key(), trouble.Error, wait))
		if attempt == 1 {
			trouble.Outcome = meshapi.NotifyFailing
			tellPlan(ctx, e.Plan, trouble)
		}
		if err := workflow.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, retry.Max)
	}
}

// noteNotifyTrouble keeps a Notifier's last word in the plan's state, one
// per target (a target that recovered leaves it), and shows it in the
// details at once.
func (p *plan) noteNotifyTrouble(ctx workflow.Context, t meshapi.NotifyTrouble) {
	p.st.NotifyTrouble = slices.DeleteFunc(p.st.NotifyTrouble, func(o meshapi.NotifyTrouble) bool { return o.Target == t.Target })
	if t.Outcome != meshapi.NotifyRecovered {
		p.st.NotifyTrouble = append(p.st.NotifyTrouble, t)
		slices.SortFunc(p.st.NotifyTrouble, func(x, y meshapi.NotifyTrouble) int { return strings.Compare(x.Target, y.Target) })
	}
	p.showDetails(ctx)
}

// tellPlan signals the plan how delivering to a target stands, so that a
// running plan shows a target in trouble. A plan that has ended (or, for a
// rejection, the plan that built the build) is not told, and that is
// fine: the Notifier's own details and the metric still say it.
func tellPlan(ctx workflow.Context, plan string, t meshapi.NotifyTrouble) {
	if err := workflow.SignalExternalWorkflow(ctx, plan, "", meshapi.SignalNotifyTrouble, t).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Info("plan not told of its notify target's trouble (it has ended)", "plan", plan, "target", t.Target, "error", err)
	}
}

func notified(ctx workflow.Context, target, event, outcome string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"target": target, "event": event, "outcome": outcome}).
		Counter(MetricNotifications).Inc(1)
}
