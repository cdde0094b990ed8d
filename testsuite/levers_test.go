package testsuite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Rejecting a build (issue 14), as an operator would from the starter, on
// the real worker, catalogue and hosts: a plan of it held at a gate and
// approved afterwards is refused as rejected and sends nothing; the
// machines already running it keep it; build list says who rejected it and
// why; a second rejection keeps the first; a bad rejection changes nothing.
func TestRejectedBuildIsNeverSent(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	h1, h2, held := s.heldAtTier2("host")
	b1, b2 := s.build("host", h1), s.build("host", h2)
	s.runs("edge-1", b2)
	before := len(s.hosts["control-node"].Applied())

	// Refused before anything is recorded: nothing changes.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"build", "reject", "--module", "host", "--commit", "0123abc", "--reason", "bad"}, cli.ExitError, "no build of host at commit 0123abc"},
		{[]string{"build", "reject", "--module", "nosuch", "--commit", h2, "--reason", "bad"}, cli.ExitUsage, `unknown module "nosuch"`},
		{[]string{"build", "reject", "--module", "host", "--commit", h2[:4], "--reason", "bad"}, cli.ExitUsage, "at least 7"},
		{[]string{"build", "reject", "--module", "host", "--commit", h2, "--reason", " "}, cli.ExitUsage, "needs reason"},
	} {
		_, err := s.starter(tc.args...)
		require.Error(t, err, "%v", tc.args)
		require.Equal(t, tc.code, cli.ExitCode(err), "%v: %v", tc.args, err)
		require.Contains(t, err.Error(), tc.says)
		r, rejected, err := s.cat.Rejected(t.Context(), b2.Digest)
		require.NoError(t, err)
		require.False(t, rejected, "a refused rejection records nothing: %+v", r)
	}

	out, err := s.starter("build", "reject", "--module", "host", "--commit", mesh.ShortCommit(h2),
		"--reason", "crashes under load after an hour", "--by", "alice", "--output", "json")
	require.NoError(t, err, out)
	var r mesh.Rejection
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.Equal(t, h2, r.Commit, "a short commit names the build")
	require.Equal(t, b2.Digest, r.Digest)
	require.Equal(t, asked("alice"), r.By)

	out, err = s.starter("build", "reject", "--module", "host", "--commit", h2, "--reason", "again", "--by", "bob", "--output", "json")
	require.NoError(t, err, out)
	var again mesh.Rejection
	require.NoError(t, json.Unmarshal([]byte(out), &again), out)
	require.Equal(t, r, again, "the first rejection is kept")

	out, err = s.starter("build", "list", "--module", "host", "--output", "json")
	require.NoError(t, err, out)
	var list meshapi.BuildsResult
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	require.Len(t, list.Builds, 2)
	newest, older := list.Builds[0], list.Builds[1]
	require.Equal(t, b2.Digest, newest.Build.Digest, "newest first")
	require.NotNil(t, newest.Rejected)
	require.Equal(t, asked("alice"), newest.Rejected.By)
	require.Equal(t, []string{"edge-1"}, newest.Running, "it keeps running where it runs")
	require.Equal(t, []string{"control-node"}, older.Running)
	require.Nil(t, older.Rejected)

	table, err := s.starter("build", "list", "--module", "host")
	require.NoError(t, err, table)
	require.Contains(t, table, "by "+asked("alice")+": crashes under load after an hour", "build list shows who rejected it, by --by and client identity")

	_, err = controlPlan(s, held, meshapi.UpdateApprove, meshapi.ApproveInput{By: "bob"})
	require.NoError(t, err)
	st := s.wait(held)
	require.Equal(t, meshapi.PlanRefused, st.State, st.Reason)
	require.Contains(t, st.Reason, "rejected by alice")
	require.Contains(t, st.Reason, "crashes under load after an hour")
	require.Len(t, s.hosts["control-node"].Applied(), before, "nothing was sent to the control node")
	s.runs("control-node", b1)
	s.runs("edge-1", b2)

	// A newer merge rolls forward as usual.
	h3 := s.commit("host")
	s.converge("host", h3)
	s.everywhere(s.build("host", h3))
}

// A rollback (issue 14), as an operator runs it, on real agents: g2 runs
// everywhere; g3's plan holds at its gate with the edge on g3; a rollback
// with no --to puts the edge back on g2 (the control node, already there,
// is left as it runs) and rejects g3, so the held plan, approved, is refused
// and sends nothing; a merge of g4 then rolls forward everywhere. Each host
// journals the rollback with the operator's name and reason and nothing
// else below a floor. Targets that are not below what runs, or rejected,
// are refused and change nothing.
func TestRollbackPutsTheFleetBackAndRejectsWhatItLeaves(t *testing.T) {
	t.Parallel()
	o := exampleMesh()
	o.exec = true
	o.images = true
	o.modules = []string{"host"}
	o.controlPlane = nil
	o.machines = hostFleet(1)
	o.health = "{min_healthy: 1s}"
	s := newStack(t, o)
	g2 := s.commit("host")
	s.converge("host", g2)
	g3 := s.commit("host")
	held := s.startGated("host", g3, 2)
	b2, b3 := s.build("host", g2), s.build("host", g3)
	s.runs("edge-1", b3)
	s.runs("control-node", b2)

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"rollback", "--module", "host", "--to", g3, "--reason", "x", "--wait"}, cli.ExitPlanFailed, "ended refused: rollback refused: rollback target host generation"},
		{[]string{"rollback", "--module", "host", "--to", "abc", "--reason", "x"}, cli.ExitUsage, "at least 7"},
		{[]string{"rollback", "--module", "host", "--reason", " "}, cli.ExitUsage, "a rollback needs reason"},
	} {
		_, err := s.starter(tc.args...)
		require.Error(t, err, "%v", tc.args)
		require.Equal(t, tc.code, cli.ExitCode(err), "%v: %v", tc.args, err)
		require.Contains(t, err.Error(), tc.says)
		_, rejected, err := s.cat.Rejected(t.Context(), b3.Digest)
		require.NoError(t, err)
		require.False(t, rejected, "a refused rollback rejects nothing")
		s.runs("edge-1", b3)
	}

	out, err := s.starter("rollback", "--module", "host", "--reason", "g3 leaks memory", "--by", "alice", "--wait", "--output", "json")
	require.NoError(t, err, out)
	var res struct {
		Plan   string
		State  meshapi.PlanStatus
		Reason string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, meshapi.RollbackID("host"), res.Plan)
	require.Equal(t, meshapi.PlanConverged, res.State, res.Reason)
	require.Contains(t, res.Reason, "rolled host back to generation")
	require.Contains(t, res.Reason, "rollback by "+asked("alice")+": g3 leaks memory")
	// The identity the starter recorded is the one the server saw.
	s.eachEvent(res.Plan, func(e *historypb.HistoryEvent) {
		if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			require.Equal(t, cli.ClientIdentity(), a.GetIdentity(), "the client identity of the rollback's start")
		}
	})
	s.runs("edge-1", b2)
	s.runs("control-node", b2)
	r, rejected, err := s.cat.Rejected(t.Context(), b3.Digest)
	require.NoError(t, err)
	require.True(t, rejected, "the build rolled back from is rejected")
	require.Equal(t, res.Plan, r.By)

	var rolled []agent.Entry
	for _, e := range s.hosts["edge-1"].journal() {
		if e.Rollback {
			rolled = append(rolled, e)
		}
	}
	require.Len(t, rolled, 1, "edge-1 journals one rollback")
	require.Equal(t, "rollback by "+asked("alice")+": g3 leaks memory", rolled[0].Reason,
		"the host journals who asked, by --by and by client identity")
	require.Equal(t, res.Plan, rolled[0].Plan)
	for _, e := range s.hosts["control-node"].journal() {
		require.False(t, e.Rollback, "the control node, already on g2, is not touched")
	}

	before := len(s.hosts["control-node"].Applied())
	_, err = controlPlan(s, held, meshapi.UpdateApprove, meshapi.ApproveInput{By: "bob"})
	require.NoError(t, err)
	st := s.wait(held)
	require.Equal(t, meshapi.PlanRefused, st.State, st.Reason)
	require.Contains(t, st.Reason, "rejected by "+res.Plan)
	require.Len(t, s.hosts["control-node"].Applied(), before, "the held plan of g3 sends nothing")

	g4 := s.commit("host")
	s.converge("host", g4)
	s.everywhere(s.build("host", g4))
}

// Syncing a machine (issue 14): edge-1's agent comes back re-imaged,
// running nothing, after g2 was rejected; `machine sync` brings it, through
// its machine workflow with the guard and health checks, to the newest
// build that ran healthy and is not rejected: g1, never g2. Bad input is
// refused before anything starts.
func TestMachineSyncBringsAReimagedMachineToTheNewestHealthyBuild(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	g1 := s.commit("host")
	s.converge("host", g1)
	g2 := s.commit("host")
	s.converge("host", g2)
	out, err := s.starter("build", "reject", "--module", "host", "--commit", g2, "--reason", "leaks", "--by", "alice")
	require.NoError(t, err, out)

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"machine", "sync", "edge-9"}, `unknown machine "edge-9"`},
		{[]string{"machine", "sync", "edge-1", "--module", "mesh-controller"}, `neither runs module "mesh-controller"`},
	} {
		_, err := s.starter(tc.args...)
		require.Error(t, err)
		require.Equal(t, cli.ExitUsage, cli.ExitCode(err), "%v: %v", tc.args, err)
		require.Contains(t, err.Error(), tc.says)
	}

	s.hosts["edge-1"].forget()
	require.Empty(t, s.hosts["edge-1"].Report().Containers, "re-imaged: runs nothing")
	out, err = s.starter("machine", "sync", "edge-1", "--wait", "--output", "json")
	require.NoError(t, err, out)
	var res []struct {
		Module string
		Plan   string
		State  meshapi.PlanStatus
		Reason string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res, 1)
	require.Equal(t, meshapi.SyncID("edge-1", "host"), res[0].Plan)
	require.Equal(t, meshapi.PlanConverged, res[0].State, res[0].Reason)
	s.runs("edge-1", s.build("host", g1))
	s.runs("control-node", s.build("host", g2)) // only the machine synced is touched
	s.checkJournal("edge-1")

	// Someone starts the controller on edge-1 by hand, beside host: the
	// config does not give it edge-1, so a sync stops it (and leaves host
	// as it runs).
	k1 := s.commit("mesh-controller")
	s.converge("mesh-controller", k1)
	e1 := s.hosts["edge-1"]
	rep := e1.Report()
	hostNow, _ := rep.Running("host")
	_, err = e1.a.Apply(t.Context(), mesh.Declaration{Machine: "edge-1", Seq: rep.LastSeq + 1, Plan: "by-hand", Request: "by-hand@edge-1",
		Containers: []mesh.Container{hostNow.Declared(), {Module: "mesh-controller", Digest: s.build("mesh-controller", k1).Digest, Generation: s.build("mesh-controller", k1).Generation}}})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "edge-1 to run the controller started by hand", func() bool {
		rc, ok := e1.Report().Running("mesh-controller")
		return ok && rc.Healthy()
	})
	out, err = s.starter("machine", "sync", "edge-1", "--wait", "--output", "json")
	require.NoError(t, err, out)
	res = nil
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res, 2, out)
	for _, r := range res {
		require.Equal(t, meshapi.PlanConverged, r.State, "%s: %s", r.Module, r.Reason)
	}
	require.Contains(t, out, "stopped mesh-controller on edge-1")
	_, stillRuns := e1.Report().Running("mesh-controller")
	require.False(t, stillRuns, "the controller is stopped")
	s.runs("edge-1", s.build("host", g1))
	s.runs("control-node", s.build("mesh-controller", k1))
	s.checkJournal("edge-1")
}
