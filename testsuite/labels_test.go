package testsuite

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
)

// labelledFleet is four edges that give no tier, two of them canaries, on
// two sites, and a control node on tier 3 by number.
func labelledFleet() stackOptions {
	return stackOptions{
		modules: []string{"host"},
		machines: []machineSpec{
			{name: "edge-1", labels: "{ring: main, site: fra1}", modules: []string{"host"}},
			{name: "edge-2", labels: "{ring: canary, site: fra1}", modules: []string{"host"}},
			{name: "edge-3", labels: "{ring: main, site: ams2}", modules: []string{"host"}},
			{name: "edge-4", labels: "{ring: canary, site: ams2}", modules: []string{"host"}},
			{name: "control-node", tier: 3, modules: []string{"host"}},
		},
		tiers: `{1: {select: "ring=canary", max_parallel: 1}, 2: {select: "site in (fra1, ams2)"}}`,
	}
}

// A tier selected by label: the plan pushes the canary-labelled machines
// as tier 1, and every one of them has applied the build before any other
// machine is sent it; status and plan list pick machines by selector.
func TestTierSelectedByLabel(t *testing.T) {
	t.Parallel()
	s := newStack(t, labelledFleet())
	st := s.converge("host", s.commit("host"))

	var tiers []int
	var machines [][]string
	for _, tr := range st.Tiers {
		tiers = append(tiers, tr.Tier)
		var names []string
		for _, m := range tr.Machines {
			names = append(names, m.Machine)
		}
		slices.Sort(names)
		machines = append(machines, names)
	}
	require.Equal(t, []int{1, 2, 3}, tiers, "the plan's tiers")
	require.Equal(t, [][]string{{"edge-2", "edge-4"}, {"edge-1", "edge-3"}, {"control-node"}}, machines, "tier 1 is the canaries, by label")

	// From the host journals: the canaries applied the plan's declaration
	// before any other machine did.
	applied := map[string]time.Time{}
	for name, h := range s.hosts {
		for _, e := range h.journal() {
			if e.Outcome == agent.OutcomeApplied && e.Plan == st.Plan {
				applied[name] = e.Time
			}
		}
	}
	require.Len(t, applied, 5, "every machine applied the plan's declaration")
	for _, canary := range []string{"edge-2", "edge-4"} {
		for _, other := range []string{"edge-1", "edge-3", "control-node"} {
			require.True(t, applied[canary].Before(applied[other]), "%s applied at %s, before %s at %s", canary, applied[canary], other, applied[other])
		}
	}

	out, err := s.starter("status", "--selector", "ring=canary", "--output", "json")
	require.NoError(t, err, out)
	var status struct {
		Machines []struct {
			Machine string            `json:"machine"`
			Tier    int               `json:"tier"`
			Labels  map[string]string `json:"labels"`
		} `json:"machines"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &status), out)
	require.Len(t, status.Machines, 2, out)
	require.Equal(t, "edge-2", status.Machines[0].Machine)
	require.Equal(t, 1, status.Machines[0].Tier)
	require.Equal(t, map[string]string{"ring": "canary", "site": "fra1"}, status.Machines[0].Labels)

	// Visibility lags the plan by a moment.
	eventually(t, time.Minute, "plan list --selector finds the plan", func() bool {
		out, err := s.starter("plan", "list", "--selector", "site in (ams2)", "--output", "json")
		require.NoError(t, err, out)
		var list []struct {
			Plan string `json:"plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &list), out)
		return len(list) == 1 && list[0].Plan == st.Plan
	})
}
