package meshapi

import "fmt"

// TierCheck is an analysis check named with the tier it ran for, for the
// words that must say both ("check error-rate of tier 1").
type TierCheck struct {
	Tier  int
	Check AnalysisCheck
}

// Inconclusive words a check the plan waits on a person for: "check
// error-rate of tier 1 is inconclusive: Prometheus unreachable", so that
// the CLI's next step and the fleet page say it alike.
func (tc TierCheck) Inconclusive() string {
	s := fmt.Sprintf("check %s of tier %d is inconclusive", tc.Check.Check, tc.Tier)
	if tc.Check.Reason != "" {
		s += ": " + tc.Check.Reason
	}
	return s
}

// AnalysisGate returns the checks a gated plan waits on a person for: an
// inconclusive check (its provider unreachable, no data) holds the plan
// gated with its tier's state unchanged, and "starter plan approve" without
// --tier passes it. Nil when the plan is not gated, or is gated before a
// tier (TierGated), which is the gate approve opens then; a dry run's
// check never holds the plan, so it is not among them.
func (s PlanState) AnalysisGate() []TierCheck {
	if s.State != PlanGated {
		return nil
	}
	var out []TierCheck
	for _, t := range s.Tiers {
		if t.State == TierGated {
			return nil
		}
		for _, c := range t.Analysis {
			if c.Verdict == AnalysisInconclusive && !c.DryRun {
				out = append(out, TierCheck{Tier: t.Tier, Check: c})
			}
		}
	}
	return out
}
