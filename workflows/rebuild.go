package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// RebuildCatalogue rebuilds a lost catalogue from what the hosts run
// (starter catalogue rebuild). Builds are reproducible and every host
// reports the module, commit and digest of what it runs, so each build the
// hosts claim is rebuilt from its commit and recorded only when the digest
// matches: what the hosts run then has its generation back, and merges
// proceed. A claim that does not verify is named and never recorded: a
// push keeps refusing to replace an unknown digest unless forced. Claims
// are built one after another, each under the plan's build options; its
// execution is the record of who rebuilt what.
func RebuildCatalogue(ctx workflow.Context, in meshapi.RebuildInput) (meshapi.RebuildResult, error) {
	claims, err := lever[meshapi.RebuildClaims](ctx, "gather what every host runs", acts.RebuildClaims, in)
	if err != nil {
		return meshapi.RebuildResult{}, err
	}
	res := meshapi.RebuildResult{Verified: []meshapi.RebuildVerdict{}, Unverified: append([]meshapi.RebuildVerdict{}, claims.Unverifiable...),
		Unreachable: claims.Unreachable}
	for _, c := range claims.Claims {
		v := meshapi.RebuildVerdict{Claim: c}
		if err := workflow.ExecuteActivity(buildOptions(ctx, c.Module, c.Commit, 0), acts.RebuildBuild, c).Get(ctx, &v); err != nil {
			v.Reason = "rebuilding it kept failing: " + errorReason(err)
		}
		if v.Verified {
			res.Verified = append(res.Verified, v)
		} else {
			res.Unverified = append(res.Unverified, v)
		}
	}
	return res, nil
}
