package activities

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/guard"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// send runs the guard against the host's report (supersede, rebase,
// refuse), numbers the declaration and sends it. The outcome has Sent set,
// with the declaration sent, when the push goes on to wait for health;
// without Sent it is how the push ended: superseded, already running, or
// refused by the guard or the host.
func (a *Activities) send(ctx context.Context, hc host.Client, in meshapi.PushInput, rep mesh.Report,
	floor map[string]mesh.Container, out meshapi.PushOutcome, log zerolog.Logger) (meshapi.PushOutcome, error) {
	req := in.Request
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
	sent := res.Declaration
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
	out.Declaration = sent
	return out, nil
}

// refusalType is the stable error type of a host API refusal code: where
// the host's wire vocabulary becomes meshroll's.
func refusalType(code string) string {
	if code == host.CodeSequence {
		return meshapi.ErrSequenceRefused
	}
	return meshapi.ErrHostRefused
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
