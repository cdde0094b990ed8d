package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// FleetBudget is the fleet's one budget of unavailable machines
// (push.max_unavailable), across every plan, batch and rollback at once. A
// machine workflow asks it for a lease before it sends a push and gives the
// lease back when the push ends; the budget grants at most Limit leases at
// a time and answers the others, in line, when a place frees. It is one
// workflow because only one writer can count without a race: every grant
// is decided in its history, one event after another, where no two plans
// can both see "one place left".
//
// The line is first come, first served, except that rollbacks and
// put-backs (LeaseAsk.Urgent) go before every merge push waiting, as they
// do in a machine's own queue. A lease that is never released — its
// machine workflow was terminated mid-push — lapses after its Hold, the
// longest its push can take; one granted to a machine workflow that no
// longer runs is dropped when the grant cannot be delivered. It lives for
// ever, continuing as new with its leases and line.
func FleetBudget(ctx workflow.Context, in meshapi.FleetBudgetInput) error {
	b := &budget{
		in:      in,
		limits:  in.Budget,
		leases:  append([]meshapi.Lease(nil), in.Leases...),
		waiting: append([]meshapi.LeaseAsk(nil), in.Waiting...),
		gone:    workflow.NewBufferedChannel(ctx, goneBuffer),
	}
	if err := workflow.SetQueryHandler(ctx, meshapi.QueryState, func() (meshapi.FleetBudgetState, error) {
		return b.state(), nil
	}); err != nil {
		return err
	}
	return b.run(ctx)
}

// goneBuffer bounds the grants that could not be delivered and wait to be
// dropped: more than a fleet's machines ever fail between two turns.
const goneBuffer = 1024

// budget is the fleet budget's state; its methods are its steps.
type budget struct {
	in meshapi.FleetBudgetInput
	// limits is the newest ask's push.max_unavailable.
	limits  meshapi.FleetBudget
	leases  []meshapi.Lease
	waiting []meshapi.LeaseAsk
	// gone takes the leases whose grant could not be delivered.
	gone workflow.Channel
	// signalling counts grants signalled and not yet delivered;
	// continue-as-new waits for them.
	signalling int
	signals    int
}

func (b *budget) state() meshapi.FleetBudgetState {
	return meshapi.FleetBudgetState{Budget: b.limits, Limit: b.limits.Limit(),
		Leases: append([]meshapi.Lease{}, b.leases...), Waiting: append([]meshapi.LeaseAsk{}, b.waiting...)}
}

// run takes asks and releases as they come, grants what fits, and lapses
// leases held past their Hold.
func (b *budget) run(ctx workflow.Context) error {
	askCh := workflow.GetSignalChannel(ctx, meshapi.SignalLeaseAsk)
	releaseCh := workflow.GetSignalChannel(ctx, meshapi.SignalLeaseRelease)
	var (
		timerAt     time.Time
		timer       workflow.Future
		cancelTimer workflow.CancelFunc
	)
	for {
		b.grant(ctx)
		budgetGauges(ctx, len(b.leases), len(b.waiting))
		if b.shouldContinue(ctx) {
			return b.continueAsNew(ctx, askCh, releaseCh)
		}
		// One timer, for the first lapse; moved only when a lease would
		// lapse earlier than it, so a grant or a release costs the
		// history no timer of its own. One that fires with nothing due
		// lapses nothing, and the next turn sets the next.
		if next := b.nextLapse(); !next.IsZero() && (timer == nil || next.Before(timerAt)) {
			if cancelTimer != nil {
				cancelTimer()
			}
			tctx, cancel := workflow.WithCancel(ctx)
			timer, cancelTimer, timerAt = workflow.NewTimer(tctx, max(next.Sub(workflow.Now(ctx)), time.Second)), cancel, next
		}
		workflow.SetCurrentDetails(ctx, b.details())

		sel := workflow.NewSelector(ctx)
		sel.AddReceive(askCh, func(c workflow.ReceiveChannel, _ bool) {
			var a meshapi.LeaseAsk
			c.Receive(ctx, &a)
			b.signals++
			b.ask(ctx, a)
		})
		sel.AddReceive(releaseCh, func(c workflow.ReceiveChannel, _ bool) {
			var r meshapi.LeaseRelease
			c.Receive(ctx, &r)
			b.signals++
			b.release(r)
		})
		sel.AddReceive(b.gone, func(c workflow.ReceiveChannel, _ bool) {
			var r meshapi.LeaseRelease
			c.Receive(ctx, &r)
			workflow.GetLogger(ctx).Warn("lease dropped: its machine workflow does not run", "machine", r.Machine, "request", r.Request)
			b.release(r)
		})
		if timer != nil {
			sel.AddFuture(timer, func(f workflow.Future) {
				timer, cancelTimer = nil, nil
				if f.Get(ctx, nil) == nil {
					b.lapse(ctx)
				}
			})
		}
		sel.Select(ctx)
	}
}

// ask takes a machine's ask: one that holds a lease is granted again (the
// lease now for this request), one already waiting keeps its place, and a
// new one joins the line — urgent ones after the urgent already waiting,
// before every merge push — and is told why it waits unless a place is
// free.
func (b *budget) ask(ctx workflow.Context, a meshapi.LeaseAsk) {
	b.limits = a.Budget
	for i, l := range b.leases {
		if l.Machine == a.Machine {
			b.leases[i].LeaseAsk = a
			b.leases[i].Until = workflow.Now(ctx).Add(a.Hold)
			b.signal(ctx, a.Machine, meshapi.LeaseGrant{Request: a.Request, Granted: true}, a.Request)
			return
		}
	}
	for i, w := range b.waiting {
		if w.Machine == a.Machine {
			b.waiting[i] = a
			return
		}
	}
	at := len(b.waiting)
	if a.Urgent {
		at = 0
		for i, w := range b.waiting {
			if w.Urgent {
				at = i + 1
			}
		}
	}
	b.waiting = slices.Insert(b.waiting, at, a)
	if at >= b.limits.Limit()-len(b.leases) {
		b.signal(ctx, a.Machine, meshapi.LeaseGrant{Request: a.Request, Words: b.waitWords(at)}, "")
	}
}

// grant gives the free places to the head of the line.
func (b *budget) grant(ctx workflow.Context) {
	for len(b.waiting) > 0 && len(b.leases) < b.limits.Limit() {
		a := b.waiting[0]
		b.waiting = b.waiting[1:]
		now := workflow.Now(ctx)
		b.leases = append(b.leases, meshapi.Lease{LeaseAsk: a, GrantedAt: now, Until: now.Add(a.Hold)})
		b.signal(ctx, a.Machine, meshapi.LeaseGrant{Request: a.Request, Granted: true}, a.Request)
	}
}

// release frees a machine's lease, if it holds the one named.
func (b *budget) release(r meshapi.LeaseRelease) {
	b.leases = slices.DeleteFunc(b.leases, func(l meshapi.Lease) bool {
		return l.Machine == r.Machine && (r.Request == "" || r.Request == l.Request)
	})
}

// nextLapse is when the first lease lapses, zero with none.
func (b *budget) nextLapse() time.Time {
	var next time.Time
	for _, l := range b.leases {
		if next.IsZero() || l.Until.Before(next) {
			next = l.Until
		}
	}
	return next
}

// lapse drops the leases held past their Hold: their push cannot still be
// running (its activity's own timeouts end it before), so the machine
// workflow that held it is gone or lost its release.
func (b *budget) lapse(ctx workflow.Context) {
	now := workflow.Now(ctx)
	b.leases = slices.DeleteFunc(b.leases, func(l meshapi.Lease) bool {
		if l.Until.After(now) {
			return false
		}
		workflow.GetLogger(ctx).Warn("lease lapsed: held past its push's longest time", "machine", l.Machine, "request", l.Request, "granted", l.GrantedAt)
		return true
	})
}

// signal sends a grant or the words of a wait to a machine workflow. A
// grant (lease set) that cannot be delivered — the machine workflow does
// not run — frees its place through b.gone.
func (b *budget) signal(ctx workflow.Context, machine string, g meshapi.LeaseGrant, lease string) {
	b.signalling++
	f := workflow.SignalExternalWorkflow(ctx, meshapi.MachineID(machine), "", meshapi.SignalLeaseGrant, g)
	workflow.Go(ctx, func(gctx workflow.Context) {
		err := f.Get(gctx, nil)
		b.signalling--
		if err != nil && lease != "" {
			b.gone.Send(gctx, meshapi.LeaseRelease{Machine: machine, Request: lease})
		}
	})
}

// waitWords says why a machine waits, at place at in line, as it is when
// said (meshapi.BudgetWaitWords).
func (b *budget) waitWords(at int) string {
	return meshapi.BudgetWaitWords(b.leases, b.limits.Limit(), at)
}

// details is the budget's current details in the Web UI.
func (b *budget) details() string {
	var s strings.Builder
	fmt.Fprintf(&s, "**fleet budget**: %d of %d unavailable (max_unavailable %s)\n\n", len(b.leases), b.limits.Limit(), b.limits)
	for _, l := range b.leases {
		fmt.Fprintf(&s, "- %s pushing %s for %s, since %s\n", l.Machine, l.Module, l.Plan, l.GrantedAt.Format(time.RFC3339))
	}
	for i, w := range b.waiting {
		fmt.Fprintf(&s, "- waiting %d: %s pushing %s for %s", i+1, w.Machine, w.Module, w.Plan)
		if w.Urgent {
			s.WriteString(" (rollback: first in line)")
		}
		s.WriteString("\n")
	}
	return s.String()
}

// shouldContinue says whether the budget should continue as new: when the
// server suggests it, or after its budget of signals (see signalBudget).
func (b *budget) shouldContinue(ctx workflow.Context) bool {
	return b.signals >= signalLimit(b.in.SignalBudget) || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// continueAsNew waits for the grants in flight, takes every ask and
// release already delivered, and continues with the leases and the line.
func (b *budget) continueAsNew(ctx workflow.Context, askCh, releaseCh workflow.ReceiveChannel) error {
	for {
		if err := workflow.Await(ctx, func() bool { return b.signalling == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		var r meshapi.LeaseRelease
		for b.gone.ReceiveAsync(&r) || releaseCh.ReceiveAsync(&r) {
			b.release(r)
		}
		took := false
		var a meshapi.LeaseAsk
		for askCh.ReceiveAsync(&a) {
			b.ask(ctx, a)
			took = true
		}
		b.grant(ctx)
		if !took && b.signalling == 0 {
			break
		}
	}
	next := meshapi.FleetBudgetInput{Budget: b.limits, Leases: b.leases, Waiting: b.waiting, SignalBudget: b.in.SignalBudget}
	return workflow.NewContinueAsNewError(ctx, meshapi.FleetBudgetWorkflowType, next)
}
