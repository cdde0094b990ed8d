// Package benchwf holds the workflows the benchmark compares meshroll with,
// run on the same dev server: a classic signal-based mutex (the contention
// baseline), plain no-op activity workflows and a holder per machine that
// runs one on each signal (the engine's ceilings). They are the bench's
// own and never run in production, so they carry no versioning.
package benchwf

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Workflow types and signal names of the bench's own workflows.
const (
	MutexWorkflowType     = "bench.Mutex"
	RequesterWorkflowType = "bench.Requester"
	FanOutWorkflowType    = "bench.FanOut"
	SingleWorkflowType    = "bench.Single"
	HolderWorkflowType    = "bench.Holder"

	SignalRequest = "bench-request"
	SignalGrant   = "bench-grant"
	SignalRelease = "bench-release"
	SignalWork    = "bench-work"
)

// MutexInput starts the mutex workflow; Acquisitions is how many grants it
// serves before it ends.
type MutexInput struct{ Acquisitions int }

// LockRequest asks the mutex for the lock on behalf of a requester workflow.
type LockRequest struct{ Requester string }

// Grant tells a requester it holds the lock.
type Grant struct{}

// Release gives the lock back.
type Release struct{ Requester string }

// Mutex grants the lock to one requester at a time, in the order requests
// arrive, each grant and release a signal: the textbook Temporal mutex.
func Mutex(ctx workflow.Context, in MutexInput) error {
	reqs := workflow.GetSignalChannel(ctx, SignalRequest)
	rels := workflow.GetSignalChannel(ctx, SignalRelease)
	for i := 0; i < in.Acquisitions; i++ {
		var r LockRequest
		reqs.Receive(ctx, &r)
		if err := workflow.SignalExternalWorkflow(ctx, r.Requester, "", SignalGrant, Grant{}).Get(ctx, nil); err != nil {
			return fmt.Errorf("grant %s: %w", r.Requester, err)
		}
		var rel Release
		rels.Receive(ctx, &rel)
	}
	return nil
}

// RequesterInput is one acquisition: take the lock, push Build to Machine
// inside it, release.
type RequesterInput struct {
	Mutex   string
	Queue   string
	Machine string
	Modules []string
	Tier    int
	Build   mesh.Build
	// Acquisitions is the mutex's total, for starting it.
	Acquisitions int
}

// Requester takes the mutex (signal-with-start from a local activity),
// runs the push as an activity while it holds it, and releases it.
func Requester(ctx workflow.Context, in RequesterInput) error {
	me := workflow.GetInfo(ctx).WorkflowExecution.ID
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var a *Activities
	if err := workflow.ExecuteLocalActivity(lctx, a.RequestLock, in, me).Get(ctx, nil); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, SignalGrant).Receive(ctx, nil)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(actx, a.CriticalPush, in).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.SignalExternalWorkflow(ctx, in.Mutex, "", SignalRelease, Release{Requester: me}).Get(ctx, nil)
}

// FanOutInput runs N no-op activities, MaxPending at a time, in one
// workflow.
type FanOutInput struct{ Activities int }

// MaxPending is the most activities FanOut has scheduled at once. The
// server fails a workflow task that would leave more than 2,000 of one
// workflow's activities pending (its limit.numPendingActivities.error), and
// retries that task for ever: the ceiling of a fleet of 3,000 machines
// scheduled at once never ended. Well below it, so that each workflow task
// schedules few enough to stay inside the SDK's one-second deadlock
// detector under -race on a busy box, and enough to keep two cores busy. A
// plan never comes near the limit: it composes and hands over a hundred
// machines per activity.
const MaxPending = 500

// FanOut is the engine's ceiling for a plan-shaped workflow: N no-op
// activities, MaxPending of them pending at any time, each one past the
// first MaxPending scheduled as the oldest still pending ends.
func FanOut(ctx workflow.Context, in FanOutInput) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var a *Activities
	fs := make([]workflow.Future, in.Activities)
	return windowed(in.Activities, MaxPending,
		func(i int) { fs[i] = workflow.ExecuteActivity(actx, a.Noop) },
		func(i int) error { return fs[i].Get(ctx, nil) })
}

// windowed starts n things in order and waits for each, in the same order,
// with at most size started and not yet waited for at any time.
func windowed(n, size int, start func(i int), wait func(i int) error) error {
	for i := range n {
		if i >= size {
			if err := wait(i - size); err != nil {
				return err
			}
		}
		start(i)
	}
	for i := max(0, n-size); i < n; i++ {
		if err := wait(i); err != nil {
			return err
		}
	}
	return nil
}

// SingleInput runs N no-op activities one after the other.
type SingleInput struct{ Activities int }

// Single is the ceiling for a sequential path: one no-op activity after
// another.
func Single(ctx workflow.Context, in SingleInput) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var a *Activities
	for i := 0; i < in.Activities; i++ {
		if err := workflow.ExecuteActivity(actx, a.Noop).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// HolderInput is how many requests a Holder serves before it ends.
type HolderInput struct{ Requests int }

// Holder is the engine's ceiling for a plan's machine workflows: one
// workflow per machine that runs a no-op activity for each request signal
// (SignalWork), as a machine workflow runs a push for each request the
// plan hands it, one after the other, and ends after in.Requests.
func Holder(ctx workflow.Context, in HolderInput) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	work := workflow.GetSignalChannel(ctx, SignalWork)
	var a *Activities
	for range in.Requests {
		work.Receive(ctx, nil)
		if err := workflow.ExecuteActivity(actx, a.Noop).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// Activities are the bench workflows' activities.
type Activities struct {
	Client client.Client
	// Push is the critical section: the direct push of the build to the
	// machine.
	Push func(ctx context.Context, in RequesterInput) error
}

// Noop does nothing.
func (a *Activities) Noop(context.Context) error { return nil }

// RequestLock signals-with-start the mutex workflow.
func (a *Activities) RequestLock(ctx context.Context, in RequesterInput, me string) error {
	_, err := a.Client.SignalWithStartWorkflow(ctx, in.Mutex, SignalRequest, LockRequest{Requester: me},
		client.StartWorkflowOptions{ID: in.Mutex, TaskQueue: in.Queue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		MutexWorkflowType, MutexInput{Acquisitions: in.Acquisitions})
	if err != nil {
		return fmt.Errorf("request lock %s: %w", in.Mutex, err)
	}
	return nil
}

// CriticalPush runs the push inside the lock.
func (a *Activities) CriticalPush(ctx context.Context, in RequesterInput) error {
	if err := a.Push(ctx, in); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "BenchPushFailed", err)
	}
	activity.GetLogger(ctx).Debug("pushed", "machine", in.Machine)
	return nil
}

// Register puts the bench workflows and activities on w.
func Register(w worker.Registry, a *Activities) {
	w.RegisterWorkflowWithOptions(Mutex, workflow.RegisterOptions{Name: MutexWorkflowType})
	w.RegisterWorkflowWithOptions(Requester, workflow.RegisterOptions{Name: RequesterWorkflowType})
	w.RegisterWorkflowWithOptions(FanOut, workflow.RegisterOptions{Name: FanOutWorkflowType})
	w.RegisterWorkflowWithOptions(Single, workflow.RegisterOptions{Name: SingleWorkflowType})
	w.RegisterWorkflowWithOptions(Holder, workflow.RegisterOptions{Name: HolderWorkflowType})
	w.RegisterActivity(a)
}
