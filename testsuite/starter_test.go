package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// starter runs the starter CLI in process against the stack's config.
func (s *stack) starter(args ...string) (string, error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	err := cli.Execute(ctx, append([]string{"--config", s.configPath}, args...), &out, &errb)
	return out.String(), err
}

// The starter as CI runs it on merge: --wait follows the plan to its end and
// prints one JSON object; delivering the same merge again says the plan
// exists; plan show gives the tiers and machines.
func TestStarterMergeWaitAndShow(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")

	out, err := s.starter("merge", "--module", "host", "--commit", h1, "--wait", "--output", "json")
	require.NoError(t, err, out)
	var merged struct {
		Plan     string `json:"plan"`
		State    string `json:"state"`
		Existing bool   `json:"existing"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &merged), out)
	require.Equal(t, meshapi.PlanID("host", h1), merged.Plan)
	require.Equal(t, string(meshapi.PlanConverged), merged.State)
	require.False(t, merged.Existing)

	out, err = s.starter("merge", "--module", "host", "--commit", h1, "--output", "json")
	require.NoError(t, err, out)
	require.NoError(t, json.Unmarshal([]byte(out), &merged), out)
	require.True(t, merged.Existing, "a re-delivered merge is told its plan exists")

	out, err = s.starter("plan", "show", merged.Plan, "--output", "json")
	require.NoError(t, err, out)
	var st meshapi.PlanState
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Tiers, 2)
	require.Equal(t, "edge-1", st.Tiers[0].Machines[0].Machine)
	require.Equal(t, meshapi.MachineConverged, st.Tiers[1].Machines[0].State)

	_, err = s.starter("plan", "show", meshapi.PlanID("host", "0000000000000000000000000000000000000000"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "not found")
}

// A --wait merge whose plan halts exits non-zero (code 3) and says where.
func TestStarterWaitExitsNonZeroWhenHalted(t *testing.T) {
	t.Parallel()
	s, h1 := edge1Down(t, "2s")
	out, err := s.starter("merge", "--module", "host", "--commit", h1, "--wait")
	require.Error(t, err, out)
	require.Equal(t, cli.ExitPlanFailed, cli.ExitCode(err))
	require.Contains(t, err.Error(), "edge-1")
}

// An operator steers a gated plan from the CLI: show says it waits at the
// gate, approve lets it through, and approving again is refused with the
// plan's own words.
func TestStarterGateApprove(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	out, err := s.starter("merge", "--module", "host", "--commit", h1, "--gate", "2")
	require.NoError(t, err, out)
	id := meshapi.PlanID("host", h1)
	waitFor(t, s, id, meshapi.PlanGated)

	out, err = s.starter("plan", "show", id)
	require.NoError(t, err, out)
	require.Contains(t, out, "gated")

	out, err = s.starter("plan", "approve", id)
	require.NoError(t, err, out)
	require.Contains(t, out, "tier 2")
	st := s.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)

	_, err = s.starter("plan", "approve", id)
	require.Error(t, err, "approving an ended plan is refused")
	require.Contains(t, err.Error(), "already ended converged")
}

// asked is how a lever run through the starter records who asked: --by and
// the client identity the starter dialled with.
func asked(by string) string { return meshapi.Who(by, cli.ClientIdentity()) }
