package testsuite

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// exampleMesh is the example: the control node runs the controller
// and the host module and is pushed last; edge-1 runs the host module.
// hostFleet is edges machines edge-1, edge-2, ... in tier 1 and
// control-node in tier 2, every one running module host: the fleet the
// health and lever tests roll one module over.
func hostFleet(edges int) []machineSpec {
	ms := make([]machineSpec, 0, edges+1)
	for i := 1; i <= edges; i++ {
		ms = append(ms, machineSpec{name: fmt.Sprintf("edge-%d", i), tier: 1, modules: []string{"host"}})
	}
	return append(ms, machineSpec{name: "control-node", tier: 2, modules: []string{"host"}})
}

func exampleMesh() stackOptions {
	return stackOptions{
		modules:      []string{"mesh-controller", "host"},
		controlPlane: []string{"mesh-controller"},
		machines: []machineSpec{
			{name: "control-node", tier: 2, modules: []string{"mesh-controller", "host"}},
			{name: "edge-1", tier: 1, modules: []string{"host"}},
		},
	}
}

// Two overlapping plans per module, started together: whatever order the
// server runs them in, no machine sees two declarations in flight, sequences
// only grow, no generation goes down, and every machine ends on the newest
// build of each module.
func TestOverlappingPlansNeverOverlapOrDowngrade(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	h1, k1 := s.commit("host"), s.commit("mesh-controller")
	h2, k2 := s.commit("host"), s.commit("mesh-controller")

	var wg sync.WaitGroup
	states := make([]meshapi.PlanState, 4)
	for i, m := range []struct{ module, commit string }{{"host", h1}, {"mesh-controller", k1}, {"host", h2}, {"mesh-controller", k2}} {
		id := s.start(m.module, m.commit).ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i] = s.wait(id)
		}()
	}
	wg.Wait()
	for _, st := range states {
		require.Contains(t, []meshapi.PlanStatus{meshapi.PlanConverged, meshapi.PlanSuperseded}, st.State, "%s: %s", st.Plan, st.Reason)
	}
	for _, m := range []string{"control-node", "edge-1"} {
		s.checkJournal(m)
	}
	s.runs("control-node", s.build("host", h2), s.build("mesh-controller", k2))
	s.runs("edge-1", s.build("host", h2))
}

// The 2026-10-02 incident, end to end: a host plan composes the control
// node while controller k1 runs, then waits at its gate; a controller plan
// rolls k2 out; when the host plan goes on, it must send k2 (rebased), never
// the k1 it recorded.
func TestStaleControllerPlanIsRebasedNotDowngraded(t *testing.T) {
	t.Parallel()
	staleControllerRebased(t, exampleMesh())
}

// edge1Down stands up the example mesh with a push retry budget of budget
// and edge-1's host down, and gives a host commit to merge: the set-up of
// the tests of a plan that cannot reach a machine.
func edge1Down(t *testing.T, budget string) (*stack, string) {
	t.Helper()
	o := exampleMesh()
	o.push = "{retry_budget: " + budget + ", running_timeout: 30s}"
	s := newStack(t, o)
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	s.hosts["edge-1"].SetDown(true)
	return s, h1
}

// staleControllerRebased plays the 2026-10-02 incident on a stack of o
// (exampleMesh's machines and modules) and asserts that the stale plan
// sent the newer controller; it returns the stack for what a runtime adds.
func staleControllerRebased(t *testing.T, o stackOptions) *stack {
	s := newStack(t, o)
	_, h2, _, k2, hostPlan := s.staleHostPlan()
	_, err := controlPlan(s, hostPlan, meshapi.UpdateApprove, meshapi.ApproveInput{By: "test"})
	require.NoError(t, err)
	st := s.wait(hostPlan)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)

	cn := progress(st, "control-node")
	require.Equal(t, []string{"mesh-controller"}, cn.Rebased, "the plan says it rebased the controller")
	s.runs("control-node", s.build("host", h2), s.build("mesh-controller", k2))
	s.checkJournal("control-node")
	last := s.hosts["control-node"].Applied()
	ctl, _ := last[len(last)-1].Container("mesh-controller")
	require.Equal(t, s.build("mesh-controller", k2).Digest, ctl.Digest, "the host was told the newer controller")
	return s
}

// An old build of the plan's own module ends superseded where a newer one
// already runs, and sends nothing there.
func TestOldBuildOfOwnModuleIsSuperseded(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	_ = s.commit("mesh-controller")
	h1, h2 := s.commit("host"), s.commit("host")
	s.converge("host", h2)
	before := len(s.hosts["edge-1"].Received())

	st := s.wait(s.start("host", h1).ID)
	require.Equal(t, meshapi.PlanSuperseded, st.State, st.Reason)
	require.Contains(t, progress(st, "edge-1").Reason, "newer than this plan's")
	require.Len(t, s.hosts["edge-1"].Received(), before, "nothing sent")
	s.runs("edge-1", s.build("host", h2))
}

// Re-delivering a merge never starts a second plan, while it runs or after
// it ended.
func TestRedeliveredMergeFindsThePlanAlreadyStarted(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	first := s.start("host", h1)
	require.False(t, first.Existing)
	again := s.start("host", h1)
	require.True(t, again.Existing, "a re-delivered merge is told the plan exists")
	require.Equal(t, first.RunID, again.RunID, "and it is the same run")
	s.wait(first.ID)
	after := s.start("host", h1)
	require.True(t, after.Existing)
	require.Equal(t, first.RunID, after.RunID, "an ended plan is not started again either")
	require.Len(t, s.hosts["edge-1"].Applied(), 1)
}

// A host unreachable for longer than the retry budget halts its tier; later
// tiers are untouched and the plan names the machine.
func TestUnreachableHostHaltsTier(t *testing.T) {
	t.Parallel()
	s, h1 := edge1Down(t, "3s")
	st := s.wait(s.start("host", h1).ID)
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, "edge-1")
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "tier 2 untouched")
	require.Empty(t, s.hosts["control-node"].Received(), "the control node was not pushed")
}

// Fifty plans waiting on one machine at once are all served, none refused
// by the server's in-flight update limit, one at a time, in sequence.
func TestFiftyPlansOnOneMachineAllServed(t *testing.T) {
	t.Parallel()
	o := stackOptions{}
	for i := range 50 {
		o.modules = append(o.modules, fmt.Sprintf("m%02d", i))
	}
	o.machines = []machineSpec{{name: "busy", tier: 0, modules: o.modules}}
	s := newStack(t, o)
	head := s.git("rev-parse", "HEAD")

	ids := make([]string, len(o.modules))
	for i, m := range o.modules {
		ids[i] = s.start(m, head).ID
	}
	for _, id := range ids {
		st := s.wait(id)
		require.Equal(t, meshapi.PlanConverged, st.State, "%s: %s", id, st.Reason)
	}
	s.checkJournal("busy")
	require.Len(t, s.hosts["busy"].Applied(), 50, "one declaration per plan")
	for _, m := range o.modules {
		s.runs("busy", s.build(m, head))
	}
}

// A plan in flight outlives its worker and the Temporal server: the worker
// is replaced while the plan waits at a gate, the server is restarted on its
// database, and the plan still converges with nothing applied twice.
func TestPlanSurvivesWorkerReplacementAndServerRestart(t *testing.T) {
	t.Parallel()
	o := exampleMesh()
	o.persist = true
	s := newStack(t, o)
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	id := s.startGated("host", h1, 2)

	s.worker.Stop()
	s.srv.Restart(t)
	s.startWorker()

	_, err := controlPlan(s, id, meshapi.UpdateApprove, meshapi.ApproveInput{By: "test"})
	require.NoError(t, err)
	st := s.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	for _, m := range []string{"edge-1", "control-node"} {
		s.checkJournal(m)
		require.Len(t, s.hosts[m].Applied(), 1, "%s: applied exactly once", m)
	}
}
