package activities

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// A plan that would wait for more answers than a workflow run may take as
// signals is refused before anything is built, naming the module, its
// machines and what to do; a plan of as many as it may take goes ahead.
func TestWithinSignalBudget(t *testing.T) {
	tiers := func(n1, n2 int, analysed bool) (meshapi.TargetsResult, map[int]int) {
		res := meshapi.TargetsResult{Tiers: []meshapi.TierPolicy{{Tier: 1}, {Tier: 2}}}
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
		name     string
		n1, n2   int
		analysed bool
		refused  bool
	}{
		{name: "the budget exactly", n1: 4000, n2: planSignalBudget - 4000},
		{name: "one machine more", n1: 4000, n2: planSignalBudget - 4000 + 1, refused: true},
		{name: "an analysed tier's put-back counts", n1: 1000, n2: planSignalBudget - 1000, analysed: true, refused: true},
		{name: "a small analysed tier fits", n1: 1000, n2: planSignalBudget - 2000, analysed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, size := tiers(c.n1, c.n2, c.analysed)
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
			want := fmt.Sprintf("module host runs on %d machines, more than one plan can push", c.n1+c.n2)
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "give the module's machines to modules of at most 9000 machines each") {
				t.Errorf("words %q, want %q and what to do", err.Error(), want)
			}
		})
	}
}
