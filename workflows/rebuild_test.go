package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/activities"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// TestRebuildCatalogueGoesOnPastAFailedBuild: a claim whose rebuild keeps
// failing is named unverified and the rebuild goes on to the next claim;
// what the hosts' gathering could not verify and the hosts it could not
// ask are in the result as it found them.
func TestRebuildCatalogueGoesOnPastAFailedBuild(t *testing.T) {
	env := quietSuite().NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	broken := meshapi.RebuildClaim{Module: "host", Commit: "c1", Digest: "sha256:1", Machines: []string{"edge-1"}}
	good := meshapi.RebuildClaim{Module: "host", Commit: "c2", Digest: "sha256:2", Machines: []string{"edge-2"}, Healthy: []string{"edge-2"}}
	bare := meshapi.RebuildVerdict{Claim: meshapi.RebuildClaim{Module: "sidecar", Digest: "sha256:3", Machines: []string{"edge-1"}}, Reason: "no commit"}
	env.OnActivity(acts.RebuildClaims, mock.Anything, mock.Anything).Return(meshapi.RebuildClaims{
		Claims: []meshapi.RebuildClaim{broken, good}, Unverifiable: []meshapi.RebuildVerdict{bare},
		Unreachable: map[string]string{"edge-3": "connection refused"},
	}, nil)
	env.OnActivity(acts.RebuildBuild, mock.Anything, mock.Anything).Return(
		func(_ context.Context, c meshapi.RebuildClaim) (meshapi.RebuildVerdict, error) {
			if c.Commit == broken.Commit {
				return meshapi.RebuildVerdict{}, temporal.NewNonRetryableApplicationError("the module's clone lacks c1", meshapi.ErrBuildFailed, nil)
			}
			b := mesh.Build{Module: c.Module, Commit: c.Commit, Digest: c.Digest, Generation: 2}
			return meshapi.RebuildVerdict{Claim: c, Verified: true, Build: &b}, nil
		})
	env.ExecuteWorkflow(RebuildCatalogue, meshapi.RebuildInput{By: "alice"})
	require.NoError(t, env.GetWorkflowError())
	var res meshapi.RebuildResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Len(t, res.Verified, 1)
	require.Equal(t, good, res.Verified[0].Claim)
	require.Len(t, res.Unverified, 2)
	require.Equal(t, bare, res.Unverified[0])
	require.Equal(t, broken, res.Unverified[1].Claim)
	require.Contains(t, res.Unverified[1].Reason, "the module's clone lacks c1")
	require.Equal(t, map[string]string{"edge-3": "connection refused"}, res.Unreachable)
	require.False(t, res.Complete())
}

// TestRebuildCatalogueNeedsWhoAsked: a rebuild that does not say who
// asked is refused before any host is asked.
func TestRebuildCatalogueNeedsWhoAsked(t *testing.T) {
	env := quietSuite().NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.ExecuteWorkflow(RebuildCatalogue, meshapi.RebuildInput{})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &appErr)
	require.Equal(t, meshapi.ErrInvalidInput, appErr.Type())
}
