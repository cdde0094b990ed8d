package activities

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host/hosttest"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// TestRebuildClaimsGathersWhatTheHostsRun: one claim per module, commit
// and digest with every machine that runs it (healthy ones apart); a
// container with no commit or of a module the config lacks is
// unverifiable before any build; a host that cannot be asked is named.
func TestRebuildClaimsGathersWhatTheHostsRun(t *testing.T) {
	h := bld("host", 3)
	withCommit := func(b mesh.Build, state string) mesh.RunningContainer {
		rc := running(b)
		rc.Commit, rc.State = b.Commit, state
		return rc
	}
	e1, e2 := hosttest.New(t, "edge-1"), hosttest.New(t, "edge-2")
	e1.Seed(withCommit(h, mesh.StateRunning), running(bld("sidecar", 1)))
	e2.Seed(withCommit(h, mesh.StateExited), withCommit(bld("db", 2), mesh.StateRunning))
	cfg := &config.Config{
		Modules:  map[string]config.Module{"host": {}, "sidecar": {}},
		Machines: map[string]config.Machine{"edge-1": {}, "edge-2": {}, "edge-3": {}},
	}
	a := &Activities{Mesh: cfg, Hosts: fixedHosts{"edge-1": e1, "edge-2": e2}, Log: zerolog.Nop()}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	got, err := execute[meshapi.RebuildClaims](t, env, a.RebuildClaims, meshapi.RebuildInput{By: "alice"})
	require.NoError(t, err)

	require.Equal(t, []meshapi.RebuildClaim{{Module: "host", Commit: h.Commit, Digest: h.Digest,
		Machines: []string{"edge-1", "edge-2"}, Healthy: []string{"edge-1"}}}, got.Claims)
	require.Len(t, got.Unverifiable, 2)
	require.Equal(t, "db", got.Unverifiable[0].Claim.Module)
	require.Contains(t, got.Unverifiable[0].Reason, "module db is not in the worker's mesh config")
	require.Equal(t, "sidecar", got.Unverifiable[1].Claim.Module)
	require.Contains(t, got.Unverifiable[1].Reason, "reports no commit")
	require.Contains(t, got.Unreachable, "edge-3")
	require.Len(t, got.Unreachable, 1)
}
