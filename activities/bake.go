package activities

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Bake watches a tier's machines for the tier's bake, after each has been
// healthy for its MinHealthy, before the plan starts the next tier: a soak
// that catches a build that fails only after a while. It fails, naming the
// machines, as soon as one of them turns unhealthy, restarts, stops running
// the build or breaks the healthy stretch it began the bake in (see
// bakeProblem); a machine a newer build has replaced since is no longer the
// plan's to judge and is left out.
//
// The bake is timed from when the plan scheduled it, so a retry after a
// worker died goes on with the time left rather than starting over. An
// unreachable host is not a failure (it is retried until the bake ends);
// it is named if it is still unreachable at the end.
func (a *Activities) Bake(ctx context.Context, in meshapi.BakeInput) (meshapi.BakeResult, error) {
	end := activity.GetInfo(ctx).ScheduledTime.Add(in.Bake)
	baseline := map[string]bakeBaseline{} // each machine's first report in the bake
	unreachable := map[string]error{}
	t := time.NewTicker(cmp.Or(a.PollInterval, DefaultPollInterval))
	defer t.Stop()
	for {
		var bad []string
		for _, m := range in.Machines {
			_, rep, err := a.report(ctx, m)
			if err != nil {
				unreachable[m] = err
				continue
			}
			delete(unreachable, m)
			if why := bakeProblem(rep, in.Build, baseline, m); why != "" {
				bad = append(bad, m+": "+why)
			}
		}
		if len(bad) > 0 {
			return meshapi.BakeResult{}, temporal.NewNonRetryableApplicationError(strings.Join(bad, "; "), meshapi.ErrUnhealthy, nil)
		}
		activity.RecordHeartbeat(ctx)
		if !time.Now().Before(end) {
			if len(unreachable) > 0 {
				var names []string
				for _, m := range in.Machines {
					if err, ok := unreachable[m]; ok {
						names = append(names, fmt.Sprintf("%s: %v", m, err))
					}
				}
				return meshapi.BakeResult{}, fmt.Errorf("bake of tier %d ended with hosts unreachable: %s", in.Tier, strings.Join(names, "; "))
			}
			return meshapi.BakeResult{Machines: len(in.Machines)}, nil
		}
		select {
		case <-ctx.Done():
			return meshapi.BakeResult{}, ctx.Err()
		case <-t.C:
		}
	}
}

// bakeBaseline is what a machine's first report in the bake showed of the
// plan's container: the runtime's restart count and the healthy stretch
// the bake watches (its healthy_since, or, from a host that does not
// judge health, the time it has run since).
type bakeBaseline struct {
	restarts int
	stretch  string
}

// bakeProblem says what is wrong with the build on a baking machine, or ""
// when nothing is (or a newer build has replaced it). baseline keeps each
// machine's first report.
//
// The bake reads reports now and then, so it judges the stretch, not only
// the moment: a container must stay healthy since the same moment as when
// the bake began. A new healthy_since is a break the reads fell between —
// a probe that failed and passed again, or a restart the restart count does
// not show, as when the host agent itself restarted: nothing it runs
// outlives it, its containers start anew and a new runtime counts their
// restarts from 0. A container running but not judged healthy (health
// unknown) has just been started again, and is a break too.
func bakeProblem(rep mesh.Report, b mesh.Build, baseline map[string]bakeBaseline, machine string) string {
	r, ok := rep.Running(b.Module)
	switch {
	case !ok:
		return fmt.Sprintf("no longer runs %s", b.Module)
	case r.Digest != b.Digest:
		if r.Generation > b.Generation {
			return "" // superseded by a newer build: not this plan's to judge
		}
		return fmt.Sprintf("runs %s generation %d (%s), not the plan's", b.Module, r.Generation, mesh.ShortDigest(r.Digest))
	case r.State != mesh.StateRunning:
		return fmt.Sprintf("%s is %s%s", b.Module, stateWords(r), probeSuffix(r))
	case r.Health == mesh.HealthUnhealthy:
		return fmt.Sprintf("%s turned unhealthy%s", b.Module, probeSuffix(r))
	}
	healthy, stretch := r.Health == mesh.HealthHealthy, r.HealthySince
	if r.Health == "" { // a host that does not judge health: running is healthy
		healthy, stretch = true, r.Since
	}
	if !healthy {
		return fmt.Sprintf("%s is not healthy (health %s), started again since it counted healthy%s", b.Module, r.Health, probeSuffix(r))
	}
	base, seen := baseline[machine]
	if !seen {
		baseline[machine] = bakeBaseline{restarts: r.Restarts, stretch: stretch}
		return ""
	}
	switch {
	case r.Restarts > base.restarts:
		return fmt.Sprintf("%s restarted%s", b.Module, probeSuffix(r))
	case stretch != base.stretch:
		return fmt.Sprintf("%s broke its healthy stretch: healthy since %s when the bake began, since %s now "+
			"(it failed its probe or was started again in between)", b.Module, base.stretch, stretch)
	}
	return ""
}
