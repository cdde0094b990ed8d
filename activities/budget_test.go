package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// A push request carries the worker's push.max_unavailable, a percentage
// with the fleet's size it is of, and nothing when it is not set.
func TestFleetBudgetOfTheConfig(t *testing.T) {
	fleet := map[string]config.Machine{"a": {}, "b": {}, "c": {}, "d": {}}
	for _, tc := range []struct {
		name string
		max  config.Amount
		want *meshapi.FleetBudget
	}{
		{"unset", config.Amount{}, nil},
		{"a count", config.Amount{N: 1}, &meshapi.FleetBudget{MaxUnavailable: 1, FleetSize: 4}},
		{"a percentage", config.Amount{N: 50, Percent: true}, &meshapi.FleetBudget{MaxUnavailable: 50, Percent: true, FleetSize: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Activities{Mesh: &config.Config{Machines: fleet, Push: config.Push{MaxUnavailable: tc.max}}}
			got := a.fleetBudget()
			assert.Equal(t, tc.want, got)
			if got != nil {
				assert.Equal(t, map[bool]int{false: 1, true: 2}[tc.max.Percent], got.Limit(), "its limit")
			}
		})
	}
}
