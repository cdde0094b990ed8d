package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// composeParallelism bounds how many machines one ComposeTargets reads at
// once.
const composeParallelism = 16

// ComposeTargets composes every target as Compose does, several at a time,
// in one activity: a plan across a thousand machines then records a handful
// of activities instead of a thousand. A target that fails permanently is
// named in its result; a transient failure of any target fails the batch,
// which is retried whole (composing is a read, so a retry is harmless).
func (a *Activities) ComposeTargets(ctx context.Context, in meshapi.ComposeTargetsInput) (meshapi.ComposeTargetsResult, error) {
	out := meshapi.ComposeTargetsResult{Results: make([]meshapi.ComposedTarget, len(in.Targets))}
	errs := make([]error, len(in.Targets))
	sem := make(chan struct{}, composeParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, t := range in.Targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := a.Compose(ctx, meshapi.ComposeInput{Plan: in.Plan, Target: t, Build: in.Build})
			var appErr *temporal.ApplicationError
			switch {
			case err == nil:
				out.Results[i].ComposeResult = res
			case errors.As(err, &appErr) && appErr.NonRetryable():
				out.Results[i].Error = appErr.Message()
			default:
				errs[i] = err
			}
			mu.Lock()
			done++
			activity.RecordHeartbeat(ctx, done)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return meshapi.ComposeTargetsResult{}, fmt.Errorf("compose %d machines: %w", len(in.Targets), err)
	}
	return out, nil
}

// PushAndAnswer is Push, and then the answer signalled to the plan from
// here, so that the machine workflow need not signal it (which costs its
// history a signal, its completion and a workflow task per push). A failed
// push is returned as Push returns it, for the machine workflow to answer.
// A retry after a lost completion pushes nothing twice (Push finds its own
// request applied) and signals again, which the plan ignores.
func (a *Activities) PushAndAnswer(ctx context.Context, in meshapi.PushInput) (meshapi.PushOutcome, error) {
	out, err := a.Push(ctx, in)
	if err != nil {
		return out, err
	}
	req := in.Request
	res := meshapi.PushResult{Request: req.Request, Plan: req.Plan, Machine: req.Machine, Outcome: out.Outcome,
		Reason: out.Reason, Seq: out.Seq, Rebased: out.Rebased}
	if err := a.Temporal.SignalWorkflow(ctx, req.Plan, "", meshapi.SignalPushResult, res); err != nil {
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			return out, fmt.Errorf("answer plan %s: %w", req.Plan, err)
		}
		// The plan has ended; the machine workflow keeps the answer.
		a.Log.Warn().Str("plan", req.Plan).Str("machine", req.Machine).Msg("plan did not take its answer: it has ended")
	}
	return out, nil
}

// handParallelism bounds how many machine workflows one HandPushes signals
// at once.
const handParallelism = 16

// HandPushes is EnqueuePushes for many machines at once: each request goes
// to its machine workflow by signal-with-start, handParallelism at a time,
// so that a tier of hundreds of machines is handed out in a fraction of the
// time one after the other takes. The plan runs it as a local activity: its
// input (every declaration of the tier) then stays out of the plan's
// history, which already holds the declarations from composing. A retry
// signals again, which machine workflows drop as duplicates.
func (a *Activities) HandPushes(ctx context.Context, in meshapi.EnqueueInput) (meshapi.EnqueueResult, error) {
	queue := activity.GetInfo(ctx).TaskQueue
	errs := make([]error, len(in.Requests))
	sem := make(chan struct{}, handParallelism)
	var wg sync.WaitGroup
	for i, r := range in.Requests {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = a.handPush(ctx, queue, r)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return meshapi.EnqueueResult{}, err
	}
	return meshapi.EnqueueResult{Enqueued: len(in.Requests)}, nil
}
