package config

import (
	"strconv"
	"strings"
	"time"
)

// Amount is a number of machines in a tier, written as a count (2) or as a
// percentage of the tier ("25%"). It remembers which, because a percentage
// is only a count once the tier's size is known, and a plan's tier holds
// only the machines that run its module.
type Amount struct {
	// N is the count, or the percentage when Percent.
	N int
	// Percent says N is a percentage.
	Percent bool
}

// String is the amount as the file writes it.
func (a Amount) String() string {
	if a.Percent {
		return strconv.Itoa(a.N) + "%"
	}
	return strconv.Itoa(a.N)
}

// Of is the amount of a tier of size machines: a percentage rounds down, so
// "10%" of 4 machines is 0.
func (a Amount) Of(size int) int {
	if a.Percent {
		return size * a.N / 100
	}
	return a.N
}

// TierPolicy is a tier's entry under tiers: how many of its machines are
// pushed at once, how many may fail before the plan halts, and how long the
// plan waits once the tier is healthy. It bounds what a bad build can reach:
// with max_parallel 1 and max_failed 0 it reaches one machine.
type TierPolicy struct {
	// MaxParallel is a batch: the machines pushed at once; the next batch
	// starts when this one is healthy. A percentage rounds down but is at
	// least 1.
	MaxParallel Amount `mapstructure:"max_parallel"`
	// MaxFailed is the failure budget: one more failed machine halts the
	// plan. A percentage rounds down.
	MaxFailed Amount `mapstructure:"max_failed"`
	// Bake is how long the plan waits once the tier is healthy before the
	// next tier starts, so that a fault that shows only under load shows
	// on the tier before it spreads.
	Bake time.Duration `mapstructure:"bake"`
	// Analysis names the checks (under analysis.checks) that must pass
	// once the tier is healthy, before the next tier starts: what the
	// fleet's own metrics say of the build, beyond each machine's probe.
	Analysis []string `mapstructure:"analysis"`
	// Select is a label selector (package selector): a machine the file
	// gives no tier is on the lowest-numbered tier whose Select matches
	// its labels. Empty: the tier selects no machine, only those whose
	// tier names it.
	Select string `mapstructure:"select"`
	// GroupBy names labels that split the tier into failure domains (a
	// site, a rack): machines with the same values of them are one group,
	// and MaxParallel and MaxFailed hold within each group rather than
	// across the tier, so a bad build reaches at most MaxParallel machines
	// of any one site at a time and halts the plan as soon as one site has
	// lost more than it may. Every machine of the tier must have them.
	GroupBy []string `mapstructure:"group_by"`
}

// DefaultTierPolicy is the policy of a tier not listed under tiers, and the
// base of one that is: the whole tier at once, no failure allowed, no bake,
// which is how tiers were pushed before they had a policy.
func DefaultTierPolicy() TierPolicy {
	return TierPolicy{MaxParallel: Amount{N: 100, Percent: true}}
}

// TierRollout is a tier's policy resolved for the machines one plan pushes
// in it, which is what the plan acts on.
type TierRollout struct {
	// MaxParallel is the batch size, between 1 and the tier's size (1 for
	// an empty tier).
	MaxParallel int
	// MaxFailed is how many machines may fail before the plan halts, below
	// the tier's size, so that a tier where every machine fails halts.
	MaxFailed int
	// Bake is the wait after the tier is healthy.
	Bake time.Duration
	// Analysis names the checks the tier waits on once it is healthy.
	Analysis []string
}

// Rollout resolves tier's policy for size machines: the machines of the
// tier that run the plan's module. A control-plane machine is not counted
// on here: whatever its tier says, it is pushed in a batch of its own,
// after the others (Targets marks it Alone), because a bad controller
// pushed to two control nodes at once leaves none to undo it.
func (c *Config) Rollout(tier, size int) TierRollout {
	p, ok := c.Tiers[tier]
	if !ok {
		p = DefaultTierPolicy()
	}
	r := TierRollout{
		MaxParallel: max(min(p.MaxParallel.Of(size), size), 1),
		MaxFailed:   max(min(p.MaxFailed.Of(size), size-1), 0),
		Bake:        p.Bake,
		Analysis:    p.Analysis,
	}
	return r
}

// tierProblems checks tiers: each is a tier some machine is on (a typo in a
// tier number would otherwise leave the intended tier on the defaults
// silently), its batch is at least one machine, and its failure budget
// leaves a tier whose every machine fails halting the plan.
func (c *Config) tierProblems(ps *problemList) {
	size := map[int]int{}
	for name, m := range c.Machines {
		if !c.unplaced(name) {
			size[m.Tier]++
		}
	}
	// A machine whose tier could not be read may be on any tier.
	sizesKnown := ps.skip == nil || !ps.skip.machineTiers
	for _, t := range sortedKeys(c.Tiers) {
		p, n := c.Tiers[t], size[t]
		key := "tiers." + strconv.Itoa(t)
		switch {
		case n > 0 || !sizesKnown:
		case p.Select != "" && !parses(p.Select):
			// tiers.<n>.select names what is wrong; that it selects
			// nothing follows.
		case p.Select != "" && len(c.Enroll.Modules) > 0:
			// Machines admitted through enrollment may be what it selects.
		case p.Select != "":
			ps.add(key, "no machine is on tier %d: its select %q matches no machine that is given no tier (machines are on %s); fix the selector or the labels, or remove the tier", t, p.Select, tierList(size))
		default:
			ps.add(key, "no machine is on tier %d (machines are on %s); fix the tier number or remove it", t, tierList(size))
		}
		switch mp := p.MaxParallel; {
		case mp.N < 1:
			ps.add(key+".max_parallel", "must be at least 1 machine or 1%%, got %s", mp)
		case mp.Percent && mp.N > 100:
			ps.add(key+".max_parallel", "must be at most 100%% (the whole tier), got %s", mp)
		}
		const all = "every machine of the tier could fail without halting the plan"
		switch mf := p.MaxFailed; {
		case mf.N < 0:
			ps.add(key+".max_failed", "must be 0 or more, got %s", mf)
		case mf.Percent && mf.N >= 100:
			ps.add(key+".max_failed", "must be below 100%%, got %s: %s", mf, all)
		case !mf.Percent && n > 0 && sizesKnown && mf.N >= n:
			ps.add(key+".max_failed", "must be below the tier's %d machines, got %s: %s", n, mf, all)
		}
		if p.Bake < 0 {
			ps.add(key+".bake", "must be a duration of 0s or more, such as 5m, got %s", p.Bake)
		}
	}
}

// tierList names the tiers machines are on, in order, for a message.
func tierList(size map[int]int) string {
	tiers := make([]string, 0, len(size))
	for _, t := range sortedKeys(size) {
		tiers = append(tiers, strconv.Itoa(t))
	}
	switch len(tiers) {
	case 0:
		return "no tier"
	case 1:
		return "tier " + tiers[0]
	}
	return "tiers " + strings.Join(tiers, ", ")
}
