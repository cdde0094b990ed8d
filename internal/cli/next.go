package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/levers"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// freezeLookup reads the active freezes, for a plan a freeze holds to say
// the unfreeze that lifts it.
type freezeLookup func(context.Context) ([]mesh.Freeze, error)

// freezesOf is the freezeLookup through the worker (the freeze list lever),
// within a few seconds: a hint is not worth waiting for.
func (a *app) freezesOf(c client.Client) freezeLookup {
	return func(ctx context.Context) ([]mesh.Freeze, error) {
		if a.cfg == nil {
			return nil, fmt.Errorf("no config")
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err := levers.Freezes(ctx, c, a.cfg.Temporal.TaskQueue)
		return res.Freezes, err
	}
}

// nextStep is what a person must do for a plan that waits on one, as the
// command to type: the approve that opens the gate it waits at (or passes
// the inconclusive analysis check it waits on, naming it and why), the resume
// of a paused plan, the unfreeze of the freeze that holds it (read through
// freezes; without them, the flags to give it); for a plan outside its
// deployment windows, that no command lifts them. "" when the plan waits on
// nobody. The commands carry --config when the starter was given one, so
// that they reach the same Temporal.
func (a *app) nextStep(ctx context.Context, st meshapi.PlanState, freezes freezeLookup) string {
	starter := "starter"
	if a.configFlag != "" {
		starter += " --config " + a.configFlag
	}
	switch st.State {
	case meshapi.PlanGated:
		if checks := st.AnalysisGate(); len(checks) > 0 {
			why := make([]string, 0, len(checks))
			for _, c := range checks {
				why = append(why, oneLine(c.Inconclusive()))
			}
			return fmt.Sprintf("%s; once you have checked why, pass it with: %s plan approve %s, or end the plan with: %s plan abort %s",
				strings.Join(why, "; "), starter, st.Plan, starter, st.Plan)
		}
		for _, t := range st.Tiers {
			if t.State == meshapi.TierGated {
				return fmt.Sprintf("approve with: %s plan approve %s --tier %d", starter, st.Plan, t.Tier)
			}
		}
		return fmt.Sprintf("approve with: %s plan approve %s", starter, st.Plan)
	case meshapi.PlanHeld:
		switch {
		case strings.HasPrefix(st.Reason, "held: freeze"):
			if cmds := unfreezes(ctx, starter, st, freezes); len(cmds) > 0 {
				return "lift the freeze with: " + strings.Join(cmds, ", and ") + "; the plan then goes on by itself"
			}
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

// unfreezes are the commands that lift the active freezes holding the
// plan: those of its module, of a machine it has still to push, or of the
// whole mesh. None when they cannot be read.
func unfreezes(ctx context.Context, starter string, st meshapi.PlanState, freezes freezeLookup) []string {
	if freezes == nil {
		return nil
	}
	fs, err := freezes(ctx)
	if err != nil {
		return nil
	}
	var waiting []string
	for _, t := range st.Tiers {
		for _, m := range t.Machines {
			if m.State == meshapi.MachineWaiting {
				waiting = append(waiting, m.Machine)
			}
		}
	}
	var cmds []string
	for _, f := range fs {
		cmd := starter + " unfreeze" + scopeFlags(f.Module, f.Machine)
		if f.Holds(st.Module, waiting) && !slices.Contains(cmds, cmd) {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}
