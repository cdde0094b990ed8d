package testsuite

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// window is a machine's time in flight as its host's journal tells it: from
// the applied entry of a plan's declaration to the floor-raised entry after
// it (healthy for min_healthy, which is when its push answers).
type window struct {
	machine    string
	start, end time.Time
}

// windowOf reads machine's window for plan from its host's journal.
func (s *stack) windowOf(machine, plan string) window {
	s.t.Helper()
	w := window{machine: machine}
	for _, e := range s.hosts[machine].journal() {
		switch {
		case e.Outcome == agent.OutcomeApplied && e.Plan == plan:
			w.start = e.Time
		case e.Outcome == agent.OutcomeFloorRaised && !w.start.IsZero() && w.end.IsZero():
			w.end = e.Time
		}
	}
	require.False(s.t, w.start.IsZero() || w.end.IsZero(), "%s journalled its apply and its floor rising: %+v", machine, w)
	return w
}

// String is the window for a failure message.
func (w window) String() string {
	return w.machine + " " + w.start.Format("15:04:05.000") + "-" + w.end.Format("15:04:05.000")
}

// overlaps says the two windows share a moment.
func (w window) overlaps(o window) bool { return w.start.Before(o.end) && o.start.Before(w.end) }

// A 10-machine tier over two sites with group_by: [site] and max_parallel: 1
// never has two machines of one site in flight at once, as the hosts' own
// journals tell it, while the two sites do proceed side by side: a machine
// of fra1 and one of ams2 are in flight together. (The test fails both
// ways: without groups, max_parallel 1 pushes one machine at a time and no
// two windows overlap; with groups but no per-group limit, one site's
// machines overlap.)
func TestGroupByKeepsOneMachinePerSiteInFlight(t *testing.T) {
	t.Parallel()
	o := stackOptions{modules: []string{"host"}, tiers: "{1: {max_parallel: 1, max_failed: 1, group_by: [site]}}", health: "{min_healthy: 2s}"}
	site := map[string]string{}
	for i := 1; i <= 10; i++ {
		name := fmt.Sprintf("edge-%02d", i)
		site[name] = map[bool]string{true: "fra1", false: "ams2"}[i%2 == 1]
		o.machines = append(o.machines, machineSpec{name: name, tier: 1, labels: "{site: " + site[name] + "}", modules: []string{"host"}})
	}
	s := newStack(t, o)
	st := s.converge("host", s.commit("host"))

	tier := st.Tiers[0]
	require.Equal(t, 5, tier.Batches, "five batches of a machine from each site")
	require.NotNil(t, tier.Policy)
	require.Equal(t, []meshapi.GroupBudget{
		{Group: "site=ams2", Machines: 5, MaxParallel: 1, MaxFailed: 1},
		{Group: "site=fra1", Machines: 5, MaxParallel: 1, MaxFailed: 1},
	}, tier.Policy.Groups)
	require.Equal(t, " (site=ams2 5/5, site=fra1 5/5)", tier.Notes())

	bySite := map[string][]window{}
	var all []window
	for name := range site {
		w := s.windowOf(name, st.Plan)
		bySite[site[name]] = append(bySite[site[name]], w)
		all = append(all, w)
	}
	for name, ws := range bySite {
		require.Len(t, ws, 5, name)
		slices.SortFunc(ws, func(a, b window) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ws); i++ {
			require.False(t, ws[i].start.Before(ws[i-1].end), "site %s: %s was declared at %s, before %s had been healthy for min_healthy (%s)",
				name, ws[i].machine, ws[i].start.Format(time.RFC3339Nano), ws[i-1].machine, ws[i-1].end.Format(time.RFC3339Nano))
		}
	}
	across := 0
	for _, f := range bySite["fra1"] {
		for _, a := range bySite["ams2"] {
			if f.overlaps(a) {
				across++
			}
		}
	}
	require.NotZero(t, across, "the sites proceed side by side: some machine of fra1 is in flight with one of ams2 (%v)", all)

	out, err := s.starter("plan", "show", st.Plan)
	require.NoError(t, err, out)
	require.Contains(t, out, "site=ams2 5/5, site=fra1 5/5", "plan show counts each site")
}

// TestCaptureGroupHistories records plans of a tier pushed by group (change
// group-budgets): one that converges, a machine of each site at a time,
// and one halted when one site lost more machines than its max_failed.
// Like the other captures it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureGroupHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := exampleMesh()
	o.machines = o.machines[:1] // control-node, tier 2
	for i, site := range []string{"fra1", "ams2", "fra1", "ams2"} {
		o.machines = append(o.machines, machineSpec{name: fmt.Sprintf("edge-%d", i+1), tier: 1, labels: "{site: " + site + "}", modules: []string{"host"}})
	}
	o.tiers = "{1: {max_parallel: 1, group_by: [site]}}"
	o.push = "{retry_budget: 2s, running_timeout: 30s}"
	s := captureStack(t, o)
	converged := s.converge("host", s.commit("host"))
	require.Equal(t, 2, converged.Tiers[0].Batches)

	s.hosts["edge-3"].SetPostsDown(true)
	halted := s.wait(s.start("host", s.commit("host")).ID)
	require.Equal(t, meshapi.PlanHalted, halted.State)
	require.Contains(t, halted.Reason, "tier 1 halted: site=fra1 had 1 failed machine (max_failed 0): edge-3")

	s.writeHistories(
		capturedRun{"plan-grouped", converged.Plan, ""},
		capturedRun{"plan-grouped-halted", halted.Plan, ""},
	)
}
