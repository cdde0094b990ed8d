package activities

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// A plan that could hear more signals of answers than a workflow run may
// take is refused before anything is built, naming the module, its
// machines and what to do; a plan of as many as it may take goes ahead.
// Relayed, a plan hears a bundle per hundred answers of a batch, so only
// many small batches come near the budget.
func TestWithinSignalBudget(t *testing.T) {
	tiers := func(n1, n2, parallel int, analysed bool) (meshapi.TargetsResult, map[int]int) {
		res := meshapi.TargetsResult{Tiers: []meshapi.TierPolicy{{Tier: 1, MaxParallel: parallel}, {Tier: 2, MaxParallel: parallel}}}
		if analysed {
			res.Tiers[0].Analysis = []string{"error-rate"}
		}
		for tier, n := range map[int]int{1: n1, 2: n2} {
			for i := range n {
				res.Targets = append(res.Targets, meshapi.Target{Machine: fmt.Sprintf("t%d-%d", tier, i), Tier: tier})
			}
		}
		return res, map[int]int{1: n1, 2: n2}
	}
	cases := []struct {
		name             string
		n1, n2, parallel int
		analysed         bool
		refused          bool
	}{
		{name: "a small plan, a signal per answer", n1: 60, n2: 40, analysed: true},
		{name: "twenty thousand machines, all at once", n1: 10_000, n2: 10_000, analysed: true},
		{name: "twenty thousand machines, in batches of 50", n1: 10_000, n2: 10_000, parallel: 50},
		{name: "batches of two, the budget exactly", n1: 4000, n2: planSignalBudget - 4000, parallel: 2},
		{name: "batches of two, one batch more", n1: 4000, n2: planSignalBudget - 4000 + 2, parallel: 2, refused: true},
		{name: "batches of one, an analysed tier's put-back counts", n1: 1000, n2: planSignalBudget - 1000, parallel: 1, analysed: true, refused: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, size := tiers(c.n1, c.n2, c.parallel, c.analysed)
			err := withinSignalBudget("host", res, size)
			if !c.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != meshapi.ErrInvalidInput || !appErr.NonRetryable() {
				t.Fatalf("got %v, want a non-retryable %s", err, meshapi.ErrInvalidInput)
			}
			want := fmt.Sprintf("module host runs on %d machines in batches too small for one plan", c.n1+c.n2)
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "raise max_parallel of its largest tiers") {
				t.Errorf("words %q, want %q and what to do", err.Error(), want)
			}
		})
	}
}
