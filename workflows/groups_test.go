package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// sited is a tier of machines, each with its group ("site=fra1"), as the
// Targets activity gives them for a tier with group_by: [site].
func sited(n int, machineSites ...string) []meshapi.Target {
	var ts []meshapi.Target
	for i := 0; i+1 < len(machineSites); i += 2 {
		ts = append(ts, meshapi.Target{Machine: machineSites[i], Tier: n, Modules: []string{"host"}, Group: "site=" + machineSites[i+1]})
	}
	return ts
}

// fiveOnTwoSites is m1, m3, m4 on fra1 and m2, m5 on ams2: the tier's
// order (by name) mixes the sites.
var fiveOnTwoSites = sited(1, "m1", "fra1", "m2", "ams2", "m3", "fra1", "m4", "fra1", "m5", "ams2")

// bySite is tier 1's policy grouped by site, the groups sorted as the
// Targets activity sorts them.
func bySite(ams2, fra1 meshapi.GroupBudget) meshapi.TierPolicy {
	ams2.Group, ams2.Machines = "site=ams2", 2
	fra1.Group, fra1.Machines = "site=fra1", 3
	return meshapi.TierPolicy{Tier: 1, GroupBy: []string{"site"}, Groups: []meshapi.GroupBudget{ams2, fra1}}
}

// The tier's line in the Web UI's details and plan show counts each
// group's machines done, and what a group lost against its budget.
func TestTierNotesCountGroups(t *testing.T) {
	tier := meshapi.TierState{
		Tier: 2, State: meshapi.TierPushing, Batch: 2, Batches: 5,
		Policy: &meshapi.TierPolicy{Tier: 2, GroupBy: []string{"site"}, Groups: []meshapi.GroupBudget{
			{Group: "site=ams2", Machines: 5, MaxParallel: 1, MaxFailed: 1},
			{Group: "site=fra1", Machines: 5, MaxParallel: 1, MaxFailed: 1},
		}},
		Machines: []meshapi.MachineProgress{
			{Machine: "a1", Group: "site=ams2", State: meshapi.MachineConverged},
			{Machine: "a2", Group: "site=ams2", State: meshapi.MachineFailed},
			{Machine: "f1", Group: "site=fra1", State: meshapi.MachineConverged},
			{Machine: "f2", Group: "site=fra1", State: meshapi.MachineSuperseded},
			{Machine: "f3", Group: "site=fra1", State: meshapi.MachinePushing},
		},
	}
	require.Equal(t, " (batch 2 of 5, site=ams2 1/5 1 failed of 1 allowed, site=fra1 2/5)", tier.Notes())
}
