package workflows

import (
	"fmt"
	"strings"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// groupedPlan says whether the plan pushes its tiers with group_by by
// group, once its tiers are final: a plan some tier of which has groups
// (as its targets said). A tier with group_by is pushed in batches that
// hold at most max_parallel machines of each group, and halts when one
// group loses more than its max_failed.
func (p *plan) groupedPlan() bool {
	for _, t := range p.st.Tiers {
		if t.Policy != nil && len(t.Policy.Groups) > 0 {
			return true
		}
	}
	return false
}

// grouped says whether a tier of the plan is pushed by group.
func (p *plan) grouped(policy meshapi.TierPolicy) bool {
	return p.groups && len(policy.Groups) > 0
}

// tierBatches is the batches a tier is pushed in: by group (groupBatchesOf)
// for a tier with group_by, else by the tier's max_parallel (batchesOf).
func (p *plan) tierBatches(tier *meshapi.TierState, policy meshapi.TierPolicy) [][]int {
	if p.grouped(policy) {
		return groupBatchesOf(tier.Machines, p.alone, policy.Groups)
	}
	return batchesOf(tier.Machines, p.alone, policy.MaxParallel)
}

// groupBatchesOf splits a tier's machines (by index) into batches by
// group: the kth batch holds the kth max_parallel machines of every group,
// groups in their budgets' order (sorted by label values) and machines in
// the tier's order, so that the groups proceed side by side with at most
// max_parallel machines of any one group in flight. A machine marked alone
// gets a batch of its own after the others, as in batchesOf; so does one
// of no group the budgets know (which a valid config does not make).
func groupBatchesOf(machines []meshapi.MachineProgress, alone map[string]bool, groups []meshapi.GroupBudget) [][]int {
	pos := make(map[string]int, len(groups))
	for gi, g := range groups {
		pos[g.Group] = gi
	}
	members := make([][]int, len(groups))
	var solo []int
	for i, m := range machines {
		gi, ok := pos[m.Group]
		if alone[m.Machine] || !ok {
			solo = append(solo, i)
			continue
		}
		members[gi] = append(members[gi], i)
	}
	var out [][]int
	for k := 0; ; k++ {
		var batch []int
		for gi, g := range groups {
			size := g.MaxParallel
			if size <= 0 {
				size = max(len(members[gi]), 1)
			}
			if from := k * size; from < len(members[gi]) {
				batch = append(batch, members[gi][from:min(from+size, len(members[gi]))]...)
			}
		}
		if len(batch) == 0 {
			break
		}
		out = append(out, batch)
	}
	for _, i := range solo {
		out = append(out, []int{i})
	}
	return out
}

// overBudget says whether the tier's failures so far halt it, and in what
// words: more than its max_failed across the tier, or, pushed by group,
// more than its max_failed in any one group.
func (p *plan) overBudget(tier *meshapi.TierState, policy meshapi.TierPolicy, batchesLeft bool, failed, refused []string) (string, bool) {
	if !p.grouped(policy) {
		if len(failed) > policy.MaxFailed {
			return haltReason(tier, policy, batchesLeft, append(failed, refused...)), true
		}
		return "", false
	}
	counts := tier.GroupCounts()
	var over []string
	for _, g := range policy.Groups {
		if c := counts[g.Group]; c.Failed > g.MaxFailed {
			over = append(over, fmt.Sprintf("%s had %d failed %s (max_failed %d): %s",
				g.Group, c.Failed, plural(c.Failed, "machine", "machines"), g.MaxFailed, namesOf(c.FailedMachines)))
		}
	}
	if len(over) == 0 {
		return "", false
	}
	return fmt.Sprintf("tier %d halted: %s; %s: %s", tier.Tier, strings.Join(over, "; "),
		untouchedWords(tier, batchesLeft), someOf(append(failed, refused...))), true
}

// namesOf joins the first namedInReason names and counts the rest.
func namesOf(names []string) string {
	if len(names) <= namedInReason {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:namedInReason], ", "), len(names)-namedInReason)
}
