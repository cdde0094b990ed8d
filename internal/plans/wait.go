package plans

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// ErrEnded is wrapped when a plan has ended: WaitUntil's error for a plan
// that ended without getting where it was awaited, and State's for a plan
// that ended without a state (terminated, timed out). An ended plan never
// changes again, so waiting longer for it is pointless.
var ErrEnded = errors.New("ended")

// readTimeout bounds one read of a plan's state inside WaitUntil, so that a
// read that hangs (a query sent to a worker as it is killed) costs one
// read, not the whole wait.
const readTimeout = 30 * time.Second

// minEvery keeps WaitUntil from spinning when asked to poll at 0.
const minEvery = 10 * time.Millisecond

// WaitUntil reads plan id's state every interval until ok accepts it, and
// returns that state. It is the one way meshroll waits for a plan to get
// somewhere short of its end (at a gate, held, measured twice, ...): the
// starter demo and the integration tests share it, so each fails the same
// way and as early as it can. (To follow a plan to its end, Wait watches
// for the result as well.)
//
// ok sees every state read, in order, on the caller's goroutine, so it may
// also note progress or keep what it saw. A plan that ends in a state ok
// refuses returns at once with that state and an error wrapping ErrEnded
// that gives the state and its reason, as does one that ended without a
// state; a plan the server does not know returns at once with ErrNotFound.
// Any other failed read (a server restarting, a query no worker has taken
// yet) is read again at the next interval. ctx bounds the wait: when it
// ends, the error wraps ctx's error and the last read's, and names the
// plan, what was awaited and the last state seen, which is also returned.
func WaitUntil(ctx context.Context, c client.Client, id, what string, ok func(meshapi.PlanState) bool, every time.Duration) (meshapi.PlanState, error) {
	every = max(every, minEvery)
	var (
		last    meshapi.PlanState
		seen    bool
		lastErr error
	)
	for {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		st, err := State(rctx, c, id)
		cancel()
		switch {
		case err == nil:
			last, seen, lastErr = st, true, nil
			if ok(st) {
				return st, nil
			}
			if st.State.Terminal() {
				return st, fmt.Errorf("plan %s %w %s before %s", id, ErrEnded, withReason(st), what)
			}
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrEnded):
			return last, fmt.Errorf("wait for plan %s to reach %s: %w", id, what, err)
		case ctx.Err() == nil:
			// A read cut short by ctx says nothing about the plan; keep
			// the last one that failed on its own.
			lastErr = err
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, waitError(id, what, last, seen, lastErr, ctx.Err())
		case <-t.C:
		}
	}
}

// waitError words a wait that ran out: the plan, what it waited for, the
// last state it saw and the last read that failed, if any.
func waitError(id, what string, last meshapi.PlanState, seen bool, lastErr, ctxErr error) error {
	is := "its state was never read"
	if seen {
		is = "last seen " + withReason(last)
	}
	if lastErr != nil {
		return fmt.Errorf("plan %s did not reach %s: %s; last read: %w: %w", id, what, is, lastErr, ctxErr)
	}
	return fmt.Errorf("plan %s did not reach %s: %s: %w", id, what, is, ctxErr)
}

// withReason is a state with its reason, when it has one.
func withReason(st meshapi.PlanState) string {
	if st.Reason == "" {
		return string(st.State)
	}
	return fmt.Sprintf("%s (%s)", st.State, st.Reason)
}
