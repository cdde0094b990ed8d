package config

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name, push string
		want       Amount
	}{
		{"left out: no fleet-wide bound", "", Amount{}},
		{"a count", "push: {max_unavailable: 1}\n", Amount{N: 1}},
		{"a percentage of the fleet", "push: {max_unavailable: 5%}\n", Amount{N: 5, Percent: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("mesh.yaml", fmt.Appendf(nil, healthMesh, "{}", tc.push))
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Push.MaxUnavailable)
		})
	}
	t.Setenv("MESHROLL_PUSH_MAX_UNAVAILABLE", "25%")
	c, err := Parse("mesh.yaml", fmt.Appendf(nil, healthMesh, "{}", ""))
	require.NoError(t, err)
	assert.Equal(t, Amount{N: 25, Percent: true}, c.Push.MaxUnavailable, "a variable sets it")
}

// TestMaxUnavailableProblems has one case per rule: each problem names the
// key and its line (or its variable).
func TestMaxUnavailableProblems(t *testing.T) {
	checkMeshCases(t, []meshCase{
		{
			name:  "0 written is no budget at all",
			tiers: "push:\n  max_unavailable: 0\n",
			want:  []Problem{{"push.max_unavailable", "must be at least 1 machine or 1% of the fleet (leave it out for no fleet-wide bound), got 0 (line 11)"}},
		},
		{
			name:  "negative",
			tiers: "push: {max_unavailable: -1}\n",
			want:  []Problem{{"push.max_unavailable", "must be at least 1 machine or 1% of the fleet (leave it out for no fleet-wide bound), got -1 (line 10)"}},
		},
		{
			name:  "0%",
			tiers: "push: {max_unavailable: 0%}\n",
			want:  []Problem{{"push.max_unavailable", "must be at least 1 machine or 1% of the fleet (leave it out for no fleet-wide bound), got 0% (line 10)"}},
		},
		{
			name:  "above 100%",
			tiers: "push: {max_unavailable: 101%}\n",
			want:  []Problem{{"push.max_unavailable", "must be at most 100% (the whole fleet), got 101% (line 10)"}},
		},
		{
			name: "0 from a variable",
			env:  map[string]string{"MESHROLL_PUSH_MAX_UNAVAILABLE": "0"},
			want: []Problem{{"push.max_unavailable", "must be at least 1 machine or 1% of the fleet (leave it out for no fleet-wide bound), got 0 (from MESHROLL_PUSH_MAX_UNAVAILABLE)"}},
		},
		{
			name:  "not an amount",
			tiers: "push: {max_unavailable: some}\n",
			want:  []Problem{{"push.max_unavailable", `must be a number of machines such as 2 or a percentage such as 25%, got "some" (line 10)`}},
		},
		{name: "1 is fine", tiers: "push: {max_unavailable: 1}\n"},
		{name: "100% is fine", tiers: "push: {max_unavailable: 100%}\n"},
	})
}
