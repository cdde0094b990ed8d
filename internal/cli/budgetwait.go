package cli

import (
	"context"
	"time"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// maxBudgetAsks bounds how many machine workflows plan show asks whether a
// push waits for the fleet budget: a plan pushing a whole large tier at
// once shows the first ones' words, not a thousand queries.
const maxBudgetAsks = 20

// budgetAskTimeout bounds each of those queries: a machine workflow whose
// worker is busy shows the plan's own words rather than hold the command.
const budgetAskTimeout = 5 * time.Second

// withBudgetWaits gives each machine the plan is pushing whose push waits
// for a place in the fleet budget (push.max_unavailable) the budget's
// words as its reason ("waiting for the fleet budget: 1 of 1 unavailable
// (edge-3 pushing host)"), asking each machine's workflow through state.
// The plan itself does not know: the machine workflow holds its push until
// the budget grants it. A machine that cannot be asked keeps its reason.
// It writes into st, which is the caller's own (a state just queried).
func withBudgetWaits(ctx context.Context, st meshapi.PlanState, state func(context.Context, string) (meshapi.MachineState, error)) {
	asked := 0
	for i, t := range st.Tiers {
		for j, m := range t.Machines {
			if m.State != meshapi.MachinePushing || m.Reason != "" || asked >= maxBudgetAsks {
				continue
			}
			asked++
			ms, err := state(ctx, m.Machine)
			if err != nil || ms.BudgetWait == "" || ms.Current == nil || ms.Current.Plan != st.Plan {
				continue
			}
			st.Tiers[i].Machines[j].Reason = ms.BudgetWait
		}
	}
}
