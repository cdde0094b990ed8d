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
// machines, as soon as one of them turns unhealthy, restarts or stops
// running the build; a machine a newer build has replaced since is no
// longer the plan's to judge and is left out.
//
// The bake is timed from when the plan scheduled it, so a retry after a
// worker died goes on with the time left rather than starting over. An
// unreachable host is not a failure (it is retried until the bake ends);
// it is named if it is still unreachable at the end.
func (a *Activities) Bake(ctx context.Context, in meshapi.BakeInput) (meshapi.BakeResult, error) {
	end := activity.GetInfo(ctx).ScheduledTime.Add(in.Bake)
	baseline := map[string]int{} // restarts when the bake began, by machine
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

// bakeProblem says what is wrong with the build on a baking machine, or ""
// when nothing is (or a newer build has replaced it). baseline keeps each
// machine's restart count from its first report.
func bakeProblem(rep mesh.Report, b mesh.Build, baseline map[string]int, machine string) string {
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
	if n, seen := baseline[machine]; !seen {
		baseline[machine] = r.Restarts
	} else if r.Restarts > n {
		return fmt.Sprintf("%s restarted%s", b.Module, probeSuffix(r))
	}
	return ""
}
