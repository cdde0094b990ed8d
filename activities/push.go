package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/guard"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// DefaultPollInterval is how often a push reads the host's report while it
// waits for a declaration to become healthy, unless Activities.PollInterval says
// otherwise.
const DefaultPollInterval = 250 * time.Millisecond

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
// A machine workflow started with LocalPush runs it as a local activity,
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
	res := meshapi.PushResult{Request: req.Request, Plan: req.Plan, Machine: req.Machine, Outcome: out.Outcome,
		Reason: out.Reason, Seq: out.Seq, Rebased: out.Rebased}
	if err := a.Plans.Answer(ctx, res); err != nil {
		return out, fmt.Errorf("answer plan %s: %w", req.Plan, err)
	}
	return out, nil
}

// push does the push of PushAndAnswer, short of answering.
func (a *Activities) push(ctx context.Context, in meshapi.PushInput) (meshapi.PushOutcome, error) {
	req := in.Request
	log := a.Log.With().Str("plan", req.Plan).Str("machine", req.Machine).Str("module", req.Build.Module).
		Str("digest", req.Build.Digest).Int("attempt", int(activity.GetInfo(ctx).Attempt)).Logger()
	if mustAskPlan(req, activity.GetInfo(ctx).Attempt, time.Now()) {
		status, running, err := a.Plans.Running(ctx, req.Plan)
		if err != nil {
			return meshapi.PushOutcome{}, err
		}
		if !running {
			reason := fmt.Sprintf("plan %s no longer runs (%s); nothing sent to %s", req.Plan, status, req.Machine)
			log.Warn().Str("reason", reason).Msg("push dropped")
			return meshapi.PushOutcome{Outcome: meshapi.MachineCancelled, Reason: reason}, nil
		}
	}
	hc, rep, err := a.report(ctx, req.Machine)
	if err != nil {
		return meshapi.PushOutcome{}, err
	}

	out := meshapi.PushOutcome{}
	if last := in.Seq - 1; last > 0 && rep.LastSeq < last {
		// The workflow has sent this host more than it remembers: it lost
		// its state. Its floor now comes only from the fleet's records.
		out.HostLostState = fmt.Sprintf("host %s reported last sequence %d, below the %d its machine workflow had sent: it lost its state "+
			"(a replaced disk, a re-imaged machine) and is pushed from the fleet's record of its floor", req.Machine, rep.LastSeq, last)
		log.Warn().Uint64("host_seq", rep.LastSeq).Uint64("sent_seq", last).Msg("host lost its state")
	}
	if rep.LastRequest == revertID(req.Request) && rep.LastSeq > 0 {
		return revertedEarlier(req, rep, out)
	}
	// prior is the plan's module as the machine ran it before this push,
	// what a failed push puts it back on.
	var prior *mesh.Container
	if r, ok := rep.Running(req.Build.Module); ok {
		c := r.Declared()
		if g, known, err := a.lookup(ctx)(r.Digest); err == nil && known {
			c.Generation = g
		}
		prior = &c
	}
	floor, err := a.floor(ctx, req.Machine, req.Declaration, rep, in.Floor)
	if err != nil {
		return meshapi.PushOutcome{}, err
	}
	var sent mesh.Declaration
	if rep.LastRequest == req.Request && rep.LastSeq > 0 {
		// An earlier attempt's declaration reached the host; only the answer
		// was lost. Wait for it rather than sending anything again.
		log.Info().Uint64("seq", rep.LastSeq).Msg("push already applied by an earlier attempt")
		out.Seq, out.Sent = rep.LastSeq, true
		sent = declaredFromReport(rep)
		prior = nil // the report shows the plan's own build now, not what ran before
	} else {
		res, err := guard.Check(guard.Input{
			Declaration:  req.Declaration,
			Module:       req.Build.Module,
			Report:       rep,
			Lookup:       a.lookup(ctx),
			Force:        req.Force,
			Floor:        floor,
			Rejected:     a.rejected(ctx),
			Rollback:     req.Rollback != nil,
			RollbackFrom: req.FromDigest(),
			Remove:       req.Remove,
		})
		if err != nil {
			return meshapi.PushOutcome{}, fmt.Errorf("check push to %s: %w", req.Machine, err)
		}
		out.Rebased = res.Rebased
		switch res.Decision {
		case guard.Superseded:
			log.Info().Str("reason", res.Reason).Msg("push superseded")
			out.Outcome, out.Reason = meshapi.MachineSuperseded, withNote(res.Reason, out.HostLostState)
			return out, nil
		case guard.AlreadyRunning:
			out.Outcome, out.Reason, out.Declaration = meshapi.MachineConverged, withNote(res.Reason, out.HostLostState), res.Declaration
			a.markConverged(ctx, req)
			return out, nil
		case guard.Refused:
			log.Warn().Str("code", res.Code).Str("reason", res.Reason).Msg("push refused")
			out.Outcome, out.Reason = meshapi.MachineRefused, res.Reason
			return out, temporal.NewNonRetryableApplicationError(res.Reason, res.Code, nil, out)
		}
		sent = res.Declaration
		sent.Seq = max(in.Seq, rep.LastSeq+1)
		sent.Plan, sent.Request, sent.Force, sent.Reason = req.Plan, req.Request, req.Force, withNote(req.Note, out.HostLostState)
		if req.Rollback != nil {
			sent.Rollback, sent.Reason = true, withNote(req.Rollback.Words(), out.HostLostState)
			// A plan's put-back after its analysis failed is a revert too:
			// the plan it names is the one whose build failed here, and the
			// host's introduction of what runs must say so, or machine show
			// and status read that plan as the one that brought it.
			sent.Revert = req.From != nil
		}
		if len(res.Rebased) > 0 {
			log.Warn().Strs("rebased", res.Rebased).Msg("stale containers rebased onto what the machine runs")
		}
		ack, err := hc.Apply(ctx, sent)
		if err != nil {
			if r, ok := host.IsRefused(err); ok {
				out.Outcome, out.Reason = meshapi.MachineRefused, r.Error()
				log.Warn().Str("code", r.Code).Msg("host refused declaration")
				return out, temporal.NewNonRetryableApplicationError(r.Error(), refusalType(r.Code), err, out)
			}
			return meshapi.PushOutcome{}, fmt.Errorf("send declaration %d to %s: %w", sent.Seq, req.Machine, err)
		}
		out.Seq, out.Sent = ack.Seq, true
		log.Info().Uint64("seq", ack.Seq).Bool("repeat", ack.Repeat).Msg("declaration accepted")
	}
	out.Declaration = sent

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

// floor is the machine's floor as the fleet's records keep it, for every
// module the push declares or the host runs: the newer of the machine
// workflow's own record and the catalogue's newest build converged there,
// neither of them rejected. Neither comes from the host, so a host that lost its state cannot lower
// it. A catalogue that cannot answer fails the push (it is retried): a push
// that does not know the floor does not send.
func (a *Activities) floor(ctx context.Context, machine string, d mesh.Declaration, rep mesh.Report, recorded map[string]mesh.Container) (map[string]mesh.Container, error) {
	floor := map[string]mesh.Container{}
	for m, c := range recorded {
		// A rejected build is not one to hold a machine at (after a
		// rollback, the fleet is below it on purpose).
		_, rejected, err := a.Catalogue.Rejected(ctx, c.Digest)
		if err != nil {
			return nil, fmt.Errorf("floor of %s on %s: %w", m, machine, err)
		}
		if !rejected {
			floor[m] = c
		}
	}
	modules := map[string]bool{}
	for _, c := range d.Containers {
		modules[c.Module] = true
	}
	for _, r := range rep.Containers {
		modules[r.Module] = true
	}
	for _, m := range slices.Sorted(maps.Keys(modules)) {
		b, ok, err := a.Catalogue.NewestConvergedOn(ctx, m, machine)
		if err != nil {
			return nil, fmt.Errorf("floor of %s on %s: %w", m, machine, err)
		}
		if f, has := floor[m]; ok && (!has || b.Generation > f.Generation) {
			floor[m] = a.container(b)
		}
	}
	return floor, nil
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

// refusalType is the stable error type of a host API refusal code: where
// the host's wire vocabulary becomes meshroll's.
func refusalType(code string) string {
	if code == host.CodeSequence {
		return meshapi.ErrSequenceRefused
	}
	return meshapi.ErrHostRefused
}

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

// declaredFromReport rebuilds the declaration the host last applied from its
// report, for a retry that finds its own declaration already there.
func declaredFromReport(rep mesh.Report) mesh.Declaration {
	d := mesh.Declaration{Machine: rep.Machine, Seq: rep.LastSeq, Request: rep.LastRequest}
	for _, r := range rep.Containers {
		d.Containers = append(d.Containers, r.Declared())
	}
	return d
}

func (a *Activities) lookup(ctx context.Context) guard.Lookup {
	return func(digest string) (int64, bool, error) {
		b, ok, err := a.Catalogue.Lookup(ctx, digest)
		return b.Generation, ok, err
	}
}

// rejected answers the guard whether an operator rejected a digest, from
// the catalogue at the moment of sending: a rejection made while a push
// was queued still stops it.
func (a *Activities) rejected(ctx context.Context) func(string) (string, bool, error) {
	return func(digest string) (string, bool, error) {
		r, ok, err := a.Catalogue.Rejected(ctx, digest)
		if err != nil || !ok {
			return "", false, err
		}
		return r.String(), true, nil
	}
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

// PlanFresh is how recently a plan must have handed a push over for the
// push to go ahead without asking the server whether the plan still runs.
// A plan that is cancelled withdraws its queued pushes itself; the question
// is for one terminated (or timed out) under a push that waited, and it
// costs a server call per push, which most pushes (handed over and started
// at once) do not need.
const PlanFresh = 5 * time.Second

// mustAskPlan says whether the push must ask whether its plan still runs:
// a retry, a request without a hand-over time (queued by an older worker),
// one handed over longer than PlanFresh ago, or one stamped in the future
// (clocks apart: trust nothing).
func mustAskPlan(r meshapi.PushRequest, attempt int32, now time.Time) bool {
	age := now.Sub(r.HandedAt)
	return attempt > 1 || r.HandedAt.IsZero() || age < 0 || age > PlanFresh
}
