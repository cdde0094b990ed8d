package config

import (
	"slices"
	"strconv"
	"strings"

	"github.com/meshroll/meshroll/internal/selector"
)

// GroupOf is machine's failure domain within its tier: the values of its
// tier's group_by labels, written "site=fra1" (or "site=fra1,rack=r2",
// in group_by's order), and "" when the tier has no group_by. Validate
// refuses a machine that lacks one of the labels, so a valid config gives
// every machine of a grouped tier a group.
func (c *Config) GroupOf(machine string) string {
	m := c.Machines[machine]
	by := c.Tiers[m.Tier].GroupBy
	if len(by) == 0 {
		return ""
	}
	parts := make([]string, len(by))
	for i, k := range by {
		parts[i] = k + "=" + m.Labels[k]
	}
	return strings.Join(parts, ",")
}

// groupProblems checks tiers' group_by: each entry is a label key, named
// once, that the tier's machines have. A machine of the tier without one
// is named with the label it lacks; a label no machine of the tier has is
// named once, on the tier, rather than on each of its machines.
func (c *Config) groupProblems(ps *problemList) {
	for _, t := range sortedKeys(c.Tiers) {
		by := c.Tiers[t].GroupBy
		if len(by) == 0 {
			continue
		}
		key := "tiers." + strconv.Itoa(t) + ".group_by"
		var machines []string
		for _, name := range c.MachineNames() {
			if c.Machines[name].Tier == t && !c.unplaced(name) && !ps.skip.has("machines."+name+".tier") {
				machines = append(machines, name)
			}
		}
		for i, k := range by {
			if msg := selector.CheckKey(k); msg != "" {
				ps.add(key, "%s", msg)
				continue
			}
			if slices.Contains(by[:i], k) {
				ps.add(key, "names %s twice", k)
				continue
			}
			var lacking []string
			for _, name := range machines {
				if _, ok := c.Machines[name].Labels[k]; !ok {
					lacking = append(lacking, name)
				}
			}
			if len(lacking) > 0 && len(lacking) == len(machines) {
				ps.add(key, "no machine on tier %d has the label %s (its machines are %s); group by a label they have, or give them %s", t, k, strings.Join(machines, ", "), k)
				continue
			}
			for _, name := range lacking {
				ps.add("machines."+name+".labels."+k, "missing: the machine is on tier %d, which groups its machines by %s (tiers.%d.group_by); give it a %s label", t, k, t, k)
			}
		}
	}
}
