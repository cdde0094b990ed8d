package activities

import (
	"slices"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// groupBudgets resolves a tier's group_by for the plan's targets: its
// groups, sorted by their label values (the order the plan pushes them
// in), each with the tier's max_parallel and max_failed resolved for the
// group's machines, as a tier's are for the tier's (a percentage is of the
// group). Nil for a tier without group_by. Read here, with the targets'
// groups, so that the plan keeps the groups it started with.
func groupBudgets(cfg *config.Config, tier int, targets []meshapi.Target) ([]string, []meshapi.GroupBudget) {
	by := cfg.Tiers[tier].GroupBy
	if len(by) == 0 {
		return nil, nil
	}
	size := map[string]int{}
	var groups []string
	for _, t := range targets {
		if t.Tier != tier || t.Group == "" {
			continue
		}
		if size[t.Group] == 0 {
			groups = append(groups, t.Group)
		}
		size[t.Group]++
	}
	if len(groups) == 0 {
		return nil, nil
	}
	slices.Sort(groups)
	out := make([]meshapi.GroupBudget, len(groups))
	for i, g := range groups {
		r := cfg.Rollout(tier, size[g])
		out[i] = meshapi.GroupBudget{Group: g, Machines: size[g], MaxParallel: r.MaxParallel, MaxFailed: r.MaxFailed}
	}
	return slices.Clone(by), out
}

// groupedSignals is the most signals of answers relayed for a tier pushed
// by group: no more than if each group were pushed in batches of its own
// (a batch of the tier takes a batch of every group at once, and a
// hand-over of more requests is relayed in no more bundles than its parts
// would be apart).
func groupedSignals(targets []meshapi.Target, tp meshapi.TierPolicy) int {
	rest := map[string]int{}
	for _, t := range targets {
		if t.Tier == tp.Tier && !t.Alone {
			rest[t.Group]++
		}
	}
	signals := 0
	for _, g := range tp.Groups {
		signals += batchSignals(rest[g.Group], g.MaxParallel)
	}
	return signals
}
