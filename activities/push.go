package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// PushAndAnswer is the whole of one push to one machine, in one activity so
// that it costs one round trip: read the host's report, run the guard
// against it (supersede, rebase, refuse), number the declaration, send it,
// wait (heartbeating) until the host reports it healthy, and answer the
// plan that asked. Answering from here spares the machine workflow a signal,
// its completion and a workflow task per push. A push that fails is
// returned as an error for the machine workflow to answer.
//
// Only the machine's workflow calls it, one at a time, which is what makes
// it the machine's only writer. A retry after a lost answer finds its own
// request as the host's last and goes straight to waiting, so nothing is
// applied twice; it answers again, which the plan ignores.
//
// A request marked Local (push.local_activity) runs it as a local activity,
// the same code: its heartbeat then does nothing (the SDK keeps the
// workflow task alive instead), and a push run again because the worker
// running it died comes as attempt 1, not 2, but finds its hand-over older
// than PlanFresh (a workflow task's timeout has passed since), so it still
// asks whether the plan runs. It does not write to its input, which the
// workflow hands a local activity without encoding it.
func (a *Activities) PushAndAnswer(ctx context.Context, in meshapi.PushInput) (meshapi.PushOutcome, error) {
	out, err := a.push(ctx, in)
	if err != nil {
		return out, err
	}
	req := in.Request
	res := meshapi.ResultOf(req, out.Outcome, out.Reason)
	res.Seq, res.Rebased = out.Seq, out.Rebased
	if err := a.answer(ctx, res); err != nil {
		return out, fmt.Errorf("answer plan %s: %w", req.Plan, err)
	}
	return out, nil
}

// answer gives res to its plan, heartbeating while it waits, as the wait
// for health does: an answer in a bundle waits for the bundles ahead of it
// to the same plan or relay, which on an overloaded server can outlast the
// push's heartbeat timeout, and a push timed out there would be run again
// for nothing.
func (a *Activities) answer(ctx context.Context, res meshapi.PushResult) error {
	var err error
	whileBeating(ctx, cmp.Or(a.PollInterval, DefaultPollInterval), res.Seq, func() { err = a.Plans.Answer(ctx, res) })
	return err
}

// push does the push of PushAndAnswer, short of answering. It reads as
// the flow; its steps are in files of their own: what it reads before it
// decides (push_read.go: whether the plan still runs, the host's report,
// the floor), the guard and the send (push_send.go), the wait for health
// (push_wait.go) and the put-back of a push that did not run (revert.go).
func (a *Activities) push(ctx context.Context, in meshapi.PushInput) (meshapi.PushOutcome, error) {
	req := in.Request
	log := a.Log.With().Str("plan", req.Plan).Str("machine", req.Machine).Str("module", req.Build.Module).
		Str("digest", req.Build.Digest).Int("attempt", int(activity.GetInfo(ctx).Attempt)).Logger()
	gone, err := a.planGone(ctx, req)
	if err != nil {
		return meshapi.PushOutcome{}, err
	}
	if gone != "" {
		log.Warn().Str("reason", gone).Msg("push dropped")
		return meshapi.PushOutcome{Outcome: meshapi.MachineCancelled, Reason: gone}, nil
	}
	if left := a.left(req.Machine); left != "" {
		log.Warn().Str("reason", left).Msg("push skipped")
		return meshapi.PushOutcome{Outcome: meshapi.MachineSkipped, Reason: left, Left: true}, nil
	}
	hc, rep, err := a.report(ctx, req.Machine)
	if err != nil {
		return meshapi.PushOutcome{}, err
	}

	out := meshapi.PushOutcome{HostLostState: hostLostState(in, rep, log)}
	if rep.LastRequest == revertID(req.Request) && rep.LastSeq > 0 {
		return revertedEarlier(req, rep, out)
	}
	prior := a.prior(ctx, req.Build.Module, rep)
	floor, err := a.floor(ctx, req.Machine, req.Declaration, rep, in.Floor)
	if err != nil {
		return meshapi.PushOutcome{}, err
	}
	if rep.LastRequest == req.Request && rep.LastSeq > 0 {
		// An earlier attempt's declaration reached the host; only the answer
		// was lost. Wait for it rather than sending anything again.
		log.Info().Uint64("seq", rep.LastSeq).Msg("push already applied by an earlier attempt")
		out.Seq, out.Sent, out.Declaration = rep.LastSeq, true, declaredFromReport(rep)
		prior = nil // the report shows the plan's own build now, not what ran before
	} else {
		out, err = a.send(ctx, hc, in, rep, floor, out, log)
		if err != nil || !out.Sent {
			return out, err
		}
	}

	if err := a.waitHealthy(ctx, hc, req, out); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == meshapi.ErrUnhealthy {
			return a.revert(ctx, hc, req, prior, floor, out, err)
		}
		return out, err
	}
	a.markConverged(ctx, req)
	out.Outcome, out.Reason = meshapi.MachineConverged, withNote(out.Reason, out.HostLostState)
	log.Info().Uint64("seq", out.Seq).Msg("machine converged")
	return out, nil
}

// withNote adds note to reason, for a push that also has something to say
// about the host (that it lost its state).
func withNote(reason, note string) string {
	switch {
	case note == "":
		return reason
	case reason == "":
		return note
	}
	return reason + "; " + note
}

// markConverged records that the plan's build runs on the machine, so later
// compositions may give it to a machine that lacks the module. A failure is
// logged, not fatal: the push itself succeeded.
func (a *Activities) markConverged(ctx context.Context, req meshapi.PushRequest) {
	if req.Remove {
		return // the build was stopped there, not put there
	}
	if err := a.Catalogue.MarkConverged(ctx, req.Build.Digest, req.Machine); err != nil {
		a.Log.Warn().Err(err).Str("machine", req.Machine).Str("digest", req.Build.Digest).Msg("could not mark build converged")
	}
}
