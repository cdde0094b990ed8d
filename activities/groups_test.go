package activities

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Targets resolves a tier's group_by into its groups, sorted by their
// label values, each with the tier's budgets resolved for the group's
// machines (a percentage is of the group); a tier without group_by has no
// groups.
func TestTargetsResolveGroupBudgets(t *testing.T) {
	cfg := config.Default()
	cfg.Modules["host"] = config.Module{Repo: "."}
	for i, site := range []string{"fra1", "ams2", "fra1", "fra1", "ams2", "fra1"} {
		cfg.Machines[fmt.Sprintf("edge-%d", i)] = config.Machine{Tier: 1, Labels: map[string]string{"site": site}, Modules: []string{"host"}}
	}
	cfg.Machines["edge-9"] = config.Machine{Tier: 2, Modules: []string{"host"}}
	cfg.Tiers[1] = config.TierPolicy{MaxParallel: config.Amount{N: 50, Percent: true}, MaxFailed: config.Amount{N: 1}, GroupBy: []string{"site"}}
	a := &Activities{Mesh: cfg, Log: zerolog.Nop()}
	res, err := a.Targets(context.Background(), meshapi.TargetsInput{Module: "host"})
	require.NoError(t, err)
	require.Len(t, res.Tiers, 2)
	require.Equal(t, []string{"site"}, res.Tiers[0].GroupBy)
	require.Equal(t, []meshapi.GroupBudget{
		{Group: "site=ams2", Machines: 2, MaxParallel: 1, MaxFailed: 1},
		{Group: "site=fra1", Machines: 4, MaxParallel: 2, MaxFailed: 1},
	}, res.Tiers[0].Groups, "50% of each group at once, one failure per group")
	require.Equal(t, "site=ams2", res.Targets[1].Group)
	require.Nil(t, res.Tiers[1].Groups, "tier 2 has no group_by")
}

// A relayed plan's tier pushed by group hears at least a signal per batch
// of each group: 400 machines on two sites, one of each site at a time,
// count as 400 hand-overs of one, not one of 400.
func TestPlanSignalsCountGroupBatches(t *testing.T) {
	res := meshapi.TargetsResult{RelayAbove: 100, Tiers: []meshapi.TierPolicy{{Tier: 1, MaxParallel: 400, Groups: []meshapi.GroupBudget{
		{Group: "site=ams2", Machines: 200, MaxParallel: 1},
		{Group: "site=fra1", Machines: 200, MaxParallel: 1},
	}}}}
	for i := range 400 {
		res.Targets = append(res.Targets, meshapi.Target{Machine: fmt.Sprintf("edge-%03d", i), Tier: 1, Group: []string{"site=ams2", "site=fra1"}[i%2]})
	}
	require.Equal(t, 400*meshapi.RelayedSignals(1), planSignals(res, map[int]int{1: 400}))
}
