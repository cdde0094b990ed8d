package meshapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A machine's words are its place in the budget's line as it stands; a
// request not in line has none.
func TestFleetBudgetWaitWords(t *testing.T) {
	s := FleetBudgetState{Limit: 1,
		Leases:  []Lease{{LeaseAsk: LeaseAsk{Machine: "alpha-1", Module: "alpha"}}},
		Waiting: []LeaseAsk{{Machine: "alpha-2", Request: "r-a2"}, {Machine: "beta-1", Request: "r-b1"}}}
	for _, tc := range []struct {
		request, want string
		ok            bool
	}{
		{"r-a2", "waiting for the fleet budget: 1 of 1 unavailable (alpha-1 pushing alpha)", true},
		{"r-b1", "waiting for the fleet budget: 1 of 1 unavailable (alpha-1 pushing alpha), 1 ahead in line", true},
		{"r-gone", "", false},
	} {
		got, ok := s.WaitWords(tc.request)
		assert.Equal(t, tc.ok, ok, tc.request)
		assert.Equal(t, tc.want, got, tc.request)
	}
	assert.Equal(t, "waiting for the fleet budget: 0 of 2 unavailable", BudgetWaitWords(nil, 2, 0))
}
