package cli

import (
	"fmt"
	"strings"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// nextStep is what a person must do for a plan that waits on one, as the
// command to type: the approve that opens the gate it waits at, the resume
// of a paused plan, the unfreeze of a freeze that holds it; for a plan
// outside its deployment windows, that no command lifts them. "" when the
// plan waits on nobody. The commands carry --config when the starter was
// given one, so that they reach the same Temporal.
func (a *app) nextStep(st meshapi.PlanState) string {
	starter := "starter"
	if a.configFlag != "" {
		starter += " --config " + a.configFlag
	}
	switch st.State {
	case meshapi.PlanGated:
		for _, t := range st.Tiers {
			if t.State == meshapi.TierGated {
				return fmt.Sprintf("approve with: %s plan approve %s --tier %d", starter, st.Plan, t.Tier)
			}
		}
		return fmt.Sprintf("approve with: %s plan approve %s", starter, st.Plan)
	case meshapi.PlanPaused:
		return fmt.Sprintf("resume with: %s plan resume %s", starter, st.Plan)
	case meshapi.PlanHeld:
		switch {
		case strings.HasPrefix(st.Reason, "held: freeze"):
			return fmt.Sprintf("lift the freeze with: %s unfreeze [--module M] [--machine X], its scope as %q lists it; the plan then goes on by itself",
				starter, "starter freeze list")
		case strings.HasPrefix(st.Reason, "held: outside window"):
			return "no command lifts a deployment window: the plan goes on by itself when it opens"
		}
	}
	if st.Paused && !st.State.Terminal() {
		return fmt.Sprintf("resume with: %s plan resume %s", starter, st.Plan)
	}
	return ""
}

// machineShown is a machine's state as the tables show it: a machine of a
// tier the plan skipped was never pushed, whatever the plan recorded of it
// (plans from before the workflow said so leave it "waiting").
func machineShown(t meshapi.TierState, m meshapi.MachineProgress) string {
	if t.State == meshapi.TierSkipped {
		return string(meshapi.TierSkipped)
	}
	return string(m.State)
}
