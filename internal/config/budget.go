package config

// keyMaxUnavailable is the fleet budget's key.
const keyMaxUnavailable = "push.max_unavailable"

// fleetBudgetProblems checks push.max_unavailable: left out, there is no
// fleet-wide bound; written, it must let at least one machine be pushed
// (a count of 1 or more, or 1% to 100% of the fleet), since a budget of
// none would stop every plan for ever. A written 0 is refused rather than
// read as "no bound": whoever wrote it meant something else.
func (c *Config) fleetBudgetProblems(ps *problemList) {
	mu := c.Push.MaxUnavailable
	switch {
	case mu == Amount{} && !c.origins.written(keyMaxUnavailable):
	case mu.N < 1:
		ps.add(keyMaxUnavailable, "must be at least 1 machine or 1%% of the fleet (leave it out for no fleet-wide bound), got %s", mu)
	case mu.Percent && mu.N > 100:
		ps.add(keyMaxUnavailable, "must be at most 100%% (the whole fleet), got %s", mu)
	}
}

// written says whether the file or a variable sets key itself.
func (o origins) written(key string) bool {
	if _, ok := o.lines[key]; ok {
		return true
	}
	name := o.envs[key]
	return name != "" && isSet(name)
}
