package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// pushLeased runs the push of req, a request that carries
// push.max_unavailable (Budget), once the fleet budget grants the machine
// a place, and gives the place back when the push ends, healthy, failed or
// put back (the push activity waits out health and reverts within
// itself, so its end is when the machine is available again). The
// returned future is the push activity's: the loop finishes it as any
// other.
func (m *machine) pushLeased(ctx workflow.Context, req meshapi.PushRequest, start func(workflow.Context) workflow.Future) workflow.Future {
	done, settle := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		m.acquire(gctx, req)
		f := start(gctx)
		var out meshapi.PushOutcome
		err := f.Get(gctx, &out)
		rel := workflow.SignalExternalWorkflow(gctx, meshapi.FleetBudgetID(workflow.GetInfo(gctx).TaskQueueName), "", meshapi.SignalLeaseRelease,
			meshapi.LeaseRelease{Machine: m.in.Machine, Request: req.Request})
		if rerr := rel.Get(gctx, nil); rerr != nil {
			// The budget is gone (terminated); its leases went with it.
			workflow.GetLogger(gctx).Warn("fleet budget did not take the lease back", "request", req.Request, "error", rerr)
		}
		settle.Set(out, err)
	})
	return done
}

// acquire asks the fleet budget for a place and waits until it is granted,
// saying in the machine's details why it waits meanwhile. A grant for
// another request (a late answer to an earlier push's ask) is passed over.
// A machine that has waited reaskEvery without a grant asks again: the ask
// is idempotent, and it starts the budget afresh if it was terminated with
// this ask in its line.
func (m *machine) acquire(ctx workflow.Context, req meshapi.PushRequest) {
	ask := meshapi.LeaseAsk{Machine: m.in.Machine, Request: req.Request, Plan: req.Plan, Module: req.Build.Module,
		Urgent: urgent(req), Budget: *req.Budget, Hold: leaseHold(req.Policy.WithDefaults())}
	m.budgetWait = "asking the fleet budget for a place"
	m.details(ctx)
	grants := workflow.GetSignalChannel(ctx, meshapi.SignalLeaseGrant)
	for granted := false; !granted; {
		m.askLease(ctx, ask)
		tctx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, reaskEvery)
		again := false
		for !granted && !again {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(grants, func(c workflow.ReceiveChannel, _ bool) {
				var g meshapi.LeaseGrant
				c.Receive(ctx, &g)
				switch {
				case g.Request != req.Request:
				case g.Granted:
					granted = true
				default:
					m.budgetWait = g.Words
					m.details(ctx)
				}
			})
			sel.AddFuture(timer, func(workflow.Future) { again = true })
			sel.Select(ctx)
		}
		cancel()
	}
	m.budgetWait = ""
	m.details(ctx)
}

// reaskEvery is how long a machine waits for the fleet budget's answer
// before it asks again.
const reaskEvery = 10 * time.Minute

// askLease hands ask to the fleet budget (AskLease, a local activity).
func (m *machine) askLease(ctx workflow.Context, ask meshapi.LeaseAsk) {
	actx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         retryForever,
		Summary:             "ask the fleet budget for a place",
	})
	if err := workflow.ExecuteLocalActivity(actx, acts.AskLease, ask).Get(ctx, nil); err != nil {
		// Retried for ever, it ends only with the workflow.
		workflow.GetLogger(ctx).Warn("fleet budget not asked", "request", ask.Request, "error", err)
	}
}

// leaseHold is how long a lease lasts unreleased: twice the longest a push
// can take with its retries (pushOptions' schedule-to-close), so that a
// push still running never loses its place, while one whose machine
// workflow was terminated frees it in the end.
func leaseHold(p meshapi.PushPolicy) time.Duration { return 2 * (p.RetryBudget + pushAttempt(p)) }
