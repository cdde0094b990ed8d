package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// revertID is the request ID of the declaration that puts a machine back
// after request's build failed there. A retried push that finds it as the
// host's last knows the machine was already put back.
func revertID(request string) string { return request + "#revert" }

// revertDeclaration is what puts a machine back after failed (the plan's
// declaration as sent) did not become healthy: every container as it was
// sent (the plan changed only its own module) except the plan's own,
// which goes back to prior (what the host ran before the push), or, when
// that is not known (a retry), to its floor; with neither the machine did
// not run the module, and it is removed. Nothing goes below its floor: a
// revert is the one downgrade a push makes, back to the floor and never
// below it.
func revertDeclaration(failed mesh.Declaration, own string, prior *mesh.Container, floor map[string]mesh.Container) mesh.Declaration {
	d := mesh.Declaration{Machine: failed.Machine, Plan: failed.Plan, Containers: []mesh.Container{}}
	for _, c := range failed.Containers {
		if c.Module == own {
			f, hasFloor := floor[own]
			switch {
			case prior != nil && (!hasFloor || prior.Generation >= f.Generation):
				c = *prior
			case hasFloor:
				c = f
			default:
				continue
			}
		} else if f, ok := floor[c.Module]; ok && c.Generation < f.Generation {
			c = f
		}
		d.Containers = append(d.Containers, c)
	}
	return d
}

// revert puts the machine back after the push's declaration failed to
// become healthy (failure says how), and returns the push's failure with
// what was done: the revert is journalled by the host as one, naming the
// plan and the failure. A revert the host refuses, or that does not run
// either, is said in the failure; the push fails either way.
func (a *Activities) revert(ctx context.Context, hc host.Client, req meshapi.PushRequest, prior *mesh.Container,
	floor map[string]mesh.Container, out meshapi.PushOutcome, failure error) (meshapi.PushOutcome, error) {
	d := revertDeclaration(out.Declaration, req.Build.Module, prior, floor)
	d.Seq, d.Request, d.Revert, d.Reason = out.Seq+1, revertID(req.Request), true, errorMessage(failure)
	log := a.Log.With().Str("plan", req.Plan).Str("machine", req.Machine).Uint64("seq", d.Seq).Logger()
	log.Warn().Str("reason", d.Reason).Msg("putting the machine back on what it ran")

	reason := d.Reason
	ack, err := hc.Apply(ctx, d)
	switch {
	case err != nil:
		if _, refused := host.IsRefused(err); !refused {
			// Unreachable: the push is retried, and its retry finds its own
			// declaration applied and judges it again.
			return out, fmt.Errorf("put %s back on what it ran: %w", req.Machine, err)
		}
		reason += fmt.Sprintf("; could not put it back on what it ran: %v", err)
	default:
		out.Seq = ack.Seq
		watched := out
		watched.Declaration, watched.Seq = d, ack.Seq
		if werr := a.waitHealthy(ctx, hc, req, watched); werr != nil {
			if ctx.Err() != nil {
				return out, werr
			}
			reason += fmt.Sprintf("; put back on what it ran (declaration %d), which did not run either: %s", ack.Seq, errorMessage(werr))
		} else {
			reason += fmt.Sprintf("; put back on what it ran (declaration %d: %s)", ack.Seq, describe(d))
		}
	}
	out.Outcome, out.Reason = meshapi.MachineFailed, reason
	return out, temporal.NewNonRetryableApplicationError(reason, meshapi.ErrUnhealthy, nil, out)
}

// revertedEarlier is the failure of a push whose earlier attempt already
// put the machine back (the host's last request is the revert).
func revertedEarlier(req meshapi.PushRequest, rep mesh.Report, out meshapi.PushOutcome) (meshapi.PushOutcome, error) {
	out.Seq, out.Sent = rep.LastSeq, true
	out.Outcome = meshapi.MachineFailed
	out.Reason = fmt.Sprintf("an earlier attempt of this push found %s unhealthy on %s and put it back on what it ran (declaration %d)",
		req.Build.Module, req.Machine, rep.LastSeq)
	return out, temporal.NewNonRetryableApplicationError(out.Reason, meshapi.ErrUnhealthy, nil, out)
}

// describe names a declaration's containers briefly: module, generation
// and short digest each.
func describe(d mesh.Declaration) string {
	if len(d.Containers) == 0 {
		return "nothing"
	}
	s := ""
	for i, c := range d.Containers {
		if i > 0 {
			s += ", "
		}
		s += buildWords(c)
	}
	return s
}

// errorMessage is an error's message without the SDK's decoration.
func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}
