package activities

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// DefaultPollInterval is how often a push reads the host's report while it
// waits for a declaration to become healthy, unless Activities.PollInterval says
// otherwise.
const DefaultPollInterval = 250 * time.Millisecond

// waitHealthy reads the host's report until the sent declaration counts
// healthy (see healthWatch), heartbeating, and fails permanently at the
// first crash, exit, restart or break inside a container's MinHealthy, or
// when the deadline passes, naming the module, its probe and the probe's
// last output.
func (a *Activities) waitHealthy(ctx context.Context, hc host.Client, req meshapi.PushRequest, out meshapi.PushOutcome) error {
	watch := newHealthWatch(out.Declaration, out.Seq)
	limit := watch.deadline(req.Policy.WithDefaults().RunningTimeout)
	deadline := time.Now().Add(limit)
	// A host that long-polls its report is asked to answer when it changes
	// (or when a healthy window could have ended), so a push hears of a
	// container turning healthy, or crashing, at once; one that does not
	// (revision 0) is polled.
	waiter, _ := hc.(host.ReportWaiter)
	var rev uint64
	t := time.NewTicker(cmp.Or(a.PollInterval, DefaultPollInterval))
	defer t.Stop()
	for {
		var rep mesh.Report
		var err error
		if waiter != nil {
			wait := watch.wake(time.Now(), min(time.Until(deadline), reportWaitMax))
			rep, rev, err = waiter.WaitReport(ctx, rev, max(wait, 0))
		} else {
			rep, err = hc.Report(ctx)
		}
		if err == nil {
			done, bad := watch.step(rep, time.Now())
			if done {
				return nil
			}
			if bad != "" {
				out.Outcome, out.Reason = meshapi.MachineFailed, bad
				return temporal.NewNonRetryableApplicationError(bad, meshapi.ErrUnhealthy, nil, out)
			}
			if rep.LastSeq > out.Seq {
				// Something newer was applied; by the one-writer rule only an
				// operator could have done it. Ours is no longer the truth.
				return temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("host %s applied sequence %d while waiting for %d", req.Machine, rep.LastSeq, out.Seq),
					meshapi.ErrSequenceRefused, nil, out)
			}
		}
		activity.RecordHeartbeat(ctx, out.Seq)
		if time.Now().After(deadline) {
			reason := fmt.Sprintf("machine %s did not report declaration %d healthy within %s", req.Machine, out.Seq, limit)
			if pending := watch.stillPending(); pending != "" {
				reason += ": " + pending
			}
			if err != nil {
				reason += ": " + err.Error()
			}
			out.Outcome, out.Reason = meshapi.MachineFailed, reason
			return temporal.NewNonRetryableApplicationError(reason, meshapi.ErrUnhealthy, err, out)
		}
		if err == nil && rev != 0 {
			continue // the long poll did the waiting
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// reportWaitMax bounds one long-poll of a host's report, well inside the
// push's heartbeat timeout, so that the push heartbeats while it waits.
const reportWaitMax = 5 * time.Second
