package fleetui

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A machine whose push waits for a place in the fleet budget says so on
// its page, and behind whom; one whose push is under way says nothing of
// the budget.
func TestMachineWaitingForTheFleetBudget(t *testing.T) {
	for _, tc := range []struct {
		name, wait, want string
	}{
		{"waiting", "waiting for the fleet budget: 1 of 1 unavailable (edge-2 pushing metrics)",
			"Not sent yet, waiting for the fleet budget: 1 of 1 unavailable (edge-2 pushing metrics)."},
		{"under way", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := edge1(history(60, 41))
			src.details["edge-1"].Workflow.BudgetWait = tc.wait
			srv, _ := server(t, src, twoMachines)
			code, body, _ := get(t, srv, "/machines/edge-1")
			require.Equal(t, http.StatusOK, code)
			assert.Contains(t, body, "Pushing now: <b>host 28</b> for <code>plan/host/y</code>.")
			if tc.want == "" {
				assert.NotContains(t, body, "fleet budget")
				return
			}
			assert.Contains(t, body, tc.want)
		})
	}
}
