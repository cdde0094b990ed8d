package testsuite

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// Hostile merges through plans.Start, before anything is asked of the
// server: a module name with a path separator (it would end up in the
// plan's workflow ID, the catalogue and the hosts' file names) and a commit
// that is not a full id are refused with an error naming them. The client
// points at an address nothing listens on and is lazy, so any call that got
// through would fail with a connection error instead.
func TestBadInputPlansStartRefusesBeforeDialing(t *testing.T) {
	t.Parallel()
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	defer c.Close()
	commit := strings.Repeat("ab", 20)
	cases := []struct {
		name, module, commit, want string
	}{
		{"slash in module", "a/b", commit, `module name "a/b"`},
		{"dot-dot module", "../etc", commit, `module name "../etc"`},
		{"backslash in module", `a\b`, commit, `module name "a\\b"`},
		{"empty module", "", commit, `module name ""`},
		{"short commit", "host", commit[:12], `commit "` + commit[:12] + `" is not a full commit id`},
		{"commit with a path", "host", "../" + commit, `is not a full commit id`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plans.Start(context.Background(), c, "meshroll", meshapi.PlanInput{Module: tc.module, Commit: tc.commit})
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "127.0.0.1:1", "refused before any call")
		})
	}
}

// A merge of a commit that does not exist in the module's repository
// (well-formed, full, just not there), through the starter CLI: the plan
// halts at the build tier at once (no retries: it can never appear by
// retrying) with a reason naming the commit, nothing is recorded in the
// catalogue and no machine is told anything. Module names with path
// separators never get that far: the starter refuses them as unknown
// modules before it connects.
func TestBadInputCommitThatDoesNotExist(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	ghost := strings.Repeat("de", 20)
	out, err := s.starter("merge", "--module", "host", "--commit", ghost, "--wait")
	require.Error(t, err, out)
	require.Equal(t, cli.ExitPlanFailed, cli.ExitCode(err), "%v", err)
	st, serr := plans.State(context.Background(), s.c, meshapi.PlanID("host", ghost))
	require.NoError(t, serr)
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, "commit "+ghost+" is not in repository")
	require.Equal(t, meshapi.TierSkipped, st.Tiers[0].State, "no tier was pushed")
	es, cerr := s.cat.Builds(context.Background(), "host", 0)
	require.NoError(t, cerr)
	require.Empty(t, es, "nothing recorded in the catalogue")
	for m, h := range s.hosts {
		require.Empty(t, h.Received(), "%s was told nothing", m)
	}

	for _, mod := range []string{"a/b", "../host", "host/.."} {
		out, err := s.starter("merge", "--module", mod, "--commit", ghost)
		require.Error(t, err, out)
		require.Equal(t, cli.ExitUsage, cli.ExitCode(err), "%v", err)
		require.Contains(t, err.Error(), `unknown module "`+mod+`"`)
	}
}
