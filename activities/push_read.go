package activities

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"

	"github.com/meshroll/meshroll/internal/guard"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// planGone asks, when the push must (see mustAskPlan), whether the plan
// that asked for it still runs, and says why not: "" when it runs or was
// not asked.
func (a *Activities) planGone(ctx context.Context, req meshapi.PushRequest) (string, error) {
	if !mustAskPlan(req, activity.GetInfo(ctx).Attempt, time.Now()) {
		return "", nil
	}
	status, running, err := a.Plans.Running(ctx, req.Plan)
	if err != nil || running {
		return "", err
	}
	return fmt.Sprintf("plan %s no longer runs (%s); nothing sent to %s", req.Plan, status, req.Machine), nil
}

// PlanFresh is how recently a plan must have handed a push over for the
// push to go ahead without asking the server whether the plan still runs.
// A plan that is cancelled withdraws its queued pushes itself; the question
// is for one terminated (or timed out) under a push that waited, and it
// costs a server call per push, which most pushes (handed over and started
// at once) do not need.
const PlanFresh = 5 * time.Second

// mustAskPlan says whether the push must ask whether its plan still runs:
// a retry, a request handed over longer than PlanFresh ago (one without a
// hand-over time counts as handed over long ago), or one stamped in the
// future (clocks apart: trust nothing).
func mustAskPlan(r meshapi.PushRequest, attempt int32, now time.Time) bool {
	age := now.Sub(r.HandedAt)
	return attempt > 1 || age < 0 || age > PlanFresh
}

// hostLostState says, for the push's outcome, that the host lost its
// state, when its report shows less than its machine workflow had sent;
// "" when it did not.
func hostLostState(in meshapi.PushInput, rep mesh.Report, log zerolog.Logger) string {
	if last := in.Seq - 1; last > 0 && rep.LastSeq < last {
		// The workflow has sent this host more than it remembers: it lost
		// its state. Its floor now comes only from the fleet's records.
		log.Warn().Uint64("host_seq", rep.LastSeq).Uint64("sent_seq", last).Msg("host lost its state")
		return fmt.Sprintf("host %s reported last sequence %d, below the %d its machine workflow had sent: it lost its state "+
			"(a replaced disk, a re-imaged machine) and is pushed from the fleet's record of its floor", in.Request.Machine, rep.LastSeq, last)
	}
	return ""
}

// prior is module as the machine ran it before this push, what a failed
// push puts it back on; nil when the host does not run it.
func (a *Activities) prior(ctx context.Context, module string, rep mesh.Report) *mesh.Container {
	r, ok := rep.Running(module)
	if !ok {
		return nil
	}
	c := r.Declared()
	if g, known, err := a.lookup(ctx)(r.Digest); err == nil && known {
		c.Generation = g
	}
	return &c
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
			c, err := a.container(b, machine)
			if err != nil {
				return nil, fmt.Errorf("floor of %s on %s: %w", m, machine, err)
			}
			floor[m] = c
		}
	}
	return floor, nil
}

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
