package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTiers(t *testing.T) {
	c, err := Parse("mesh.yaml", fmt.Appendf(nil, healthMesh, "{}", `tiers:
  1: {max_parallel: 1, max_failed: 0, bake: 5m}
  2: {max_parallel: "50%", max_failed: "10%"}
`))
	require.NoError(t, err)
	assert.Equal(t, map[int]TierPolicy{
		1: {MaxParallel: Amount{N: 1}, MaxFailed: Amount{N: 0}, Bake: 5 * time.Minute},
		2: {MaxParallel: Amount{N: 50, Percent: true}, MaxFailed: Amount{N: 10, Percent: true}},
	}, c.Tiers)

	t.Setenv("MESHROLL_TIERS_1_MAX_FAILED", "1")
	c, err = Parse("mesh.yaml", fmt.Appendf(nil, healthMesh, "{}", "tiers:\n  1: {bake: 1m}\n"))
	require.NoError(t, err)
	assert.Equal(t, map[int]TierPolicy{1: {MaxParallel: Amount{N: 100, Percent: true}, MaxFailed: Amount{N: 1}, Bake: time.Minute}}, c.Tiers,
		"a key left out takes the default; a variable overrides one")

	c, err = Parse("mesh.yaml", []byte(valid))
	require.NoError(t, err)
	assert.Empty(t, c.Tiers)
}

func TestRollout(t *testing.T) {
	c := Default()
	c.Modules["ctl"] = Module{ControlPlane: true}
	c.Machines["cp-1"] = Machine{Tier: 9, Modules: []string{"ctl"}}
	c.Tiers = map[int]TierPolicy{
		1: {MaxParallel: Amount{N: 1}, Bake: 5 * time.Minute},
		2: {MaxParallel: Amount{N: 25, Percent: true}, MaxFailed: Amount{N: 10, Percent: true}},
		3: {MaxParallel: Amount{N: 5}, MaxFailed: Amount{N: 3}},
		9: {MaxParallel: Amount{N: 100, Percent: true}, Bake: time.Minute},
	}
	for _, tc := range []struct {
		name       string
		tier, size int
		want       TierRollout
	}{
		{"unlisted tier: all at once, no failure, no bake", 0, 7, TierRollout{MaxParallel: 7}},
		{"unlisted empty tier", 0, 0, TierRollout{MaxParallel: 1}},
		{"counts", 1, 4, TierRollout{MaxParallel: 1, Bake: 5 * time.Minute}},
		{"percentages round down", 2, 40, TierRollout{MaxParallel: 10, MaxFailed: 4}},
		{"10% of 4 is 0", 2, 4, TierRollout{MaxParallel: 1}},
		{"25% of 3 is still 1 at once", 2, 3, TierRollout{MaxParallel: 1}},
		{"a batch is at most the tier", 3, 2, TierRollout{MaxParallel: 2, MaxFailed: 1}},
		{"the budget stays below the plan's machines", 3, 3, TierRollout{MaxParallel: 3, MaxFailed: 2}},
		{"a control-plane tier keeps its policy (its machine goes alone: see Targets)", 9, 3, TierRollout{MaxParallel: 3, Bake: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, c.Rollout(tc.tier, tc.size))
		})
	}
}

// A machine running the control plane is marked to be pushed alone; the
// others of its tier are not.
func TestTargetsMarkTheControlPlaneAlone(t *testing.T) {
	c := Default()
	c.Modules["ctl"] = Module{ControlPlane: true}
	c.Modules["host"] = Module{}
	c.Machines["cp-1"] = Machine{Tier: 2, Modules: []string{"ctl", "host"}}
	c.Machines["edge-1"] = Machine{Tier: 2, Modules: []string{"host"}}
	ts, err := c.Targets("host")
	require.NoError(t, err)
	require.Len(t, ts, 2)
	alone := map[string]bool{}
	for _, tg := range ts {
		alone[tg.Machine] = tg.Alone
	}
	assert.Equal(t, map[string]bool{"cp-1": true, "edge-1": false}, alone)
}

// TestTierProblems has one case per rule: each problem names its key and
// its line.
func TestTierProblems(t *testing.T) {
	checkMeshCases(t, []meshCase{
		{
			name:  "max_parallel 0",
			tiers: "tiers:\n  1: {max_parallel: 0}\n",
			want:  []Problem{{"tiers.1.max_parallel", "must be at least 1 machine or 1%, got 0 (line 11)"}},
		},
		{
			name:  "max_parallel negative",
			tiers: "tiers:\n  1: {max_parallel: -2}\n",
			want:  []Problem{{"tiers.1.max_parallel", "must be at least 1 machine or 1%, got -2 (line 11)"}},
		},
		{
			name:  "max_parallel 0%",
			tiers: "tiers:\n  1: {max_parallel: 0%}\n",
			want:  []Problem{{"tiers.1.max_parallel", "must be at least 1 machine or 1%, got 0% (line 11)"}},
		},
		{
			name:  "max_parallel above 100%",
			tiers: "tiers:\n  1: {max_parallel: 150%}\n",
			want:  []Problem{{"tiers.1.max_parallel", "must be at most 100% (the whole tier), got 150% (line 11)"}},
		},
		{
			name:  "max_parallel not an amount",
			tiers: "tiers:\n  1: {max_parallel: half}\n",
			want:  []Problem{{"tiers.1.max_parallel", `must be a number of machines such as 2 or a percentage such as 25%, got "half" (line 11)`}},
		},
		{
			name:  "max_failed negative",
			tiers: "tiers:\n  1: {max_failed: -1}\n",
			want:  []Problem{{"tiers.1.max_failed", "must be 0 or more, got -1 (line 11)"}},
		},
		{
			name:  "max_failed 100%",
			tiers: "tiers:\n  1: {max_failed: 100%}\n",
			want:  []Problem{{"tiers.1.max_failed", "must be below 100%, got 100%: every machine of the tier could fail without halting the plan (line 11)"}},
		},
		{
			name:  "max_failed at the tier's size",
			tiers: "tiers:\n  1: {max_failed: 2}\n",
			want:  []Problem{{"tiers.1.max_failed", "must be below the tier's 2 machines, got 2: every machine of the tier could fail without halting the plan (line 11)"}},
		},
		{
			name:  "bake negative",
			tiers: "tiers:\n  1: {bake: -5m}\n",
			want:  []Problem{{"tiers.1.bake", "must be a duration of 0s or more, such as 5m, got -5m0s (line 11)"}},
		},
		{
			name:  "bake does not parse",
			tiers: "tiers:\n  1: {bake: 300}\n",
			want:  []Problem{{"tiers.1.bake", "must be a duration such as 90s or 5m, got 300 (line 11)"}},
		},
		{
			name:  "tier no machine is on",
			tiers: "tiers:\n  1: {}\n  3: {max_parallel: 1}\n",
			want:  []Problem{{"tiers.3", "no machine is on tier 3 (machines are on tiers 1, 2); fix the tier number or remove it (line 12)"}},
		},
		{
			name:  "tier that is not a number",
			tiers: "tiers:\n  one: {}\n  01: {}\n",
			want: []Problem{
				{"tiers.01", "is not a tier number; write it as machines' tier is written, such as 1 (line 12)"},
				{"tiers.one", "is not a tier number; write it as machines' tier is written, such as 1 (line 11)"},
			},
		},
		{
			name:  "tier and tiers of the wrong shape",
			tiers: "tiers:\n  1: 2\n  2: {max_parallel: 1, max_failures: 1}\n",
			want: []Problem{
				{"tiers.1", "must be a mapping of max_parallel, max_failed, bake, analysis, select, group_by, got 2 (line 11)"},
				{"tiers.2.max_failures", "unknown key; known keys: max_parallel, max_failed, bake, analysis, select, group_by (line 12)"},
			},
		},
		{
			name:  "amount from the environment",
			tiers: "tiers:\n  1: {max_parallel: 1}\n",
			env:   map[string]string{"MESHROLL_TIERS_1_MAX_PARALLEL": "0"},
			want:  []Problem{{"tiers.1.max_parallel", "must be at least 1 machine or 1%, got 0 (from MESHROLL_TIERS_1_MAX_PARALLEL)"}},
		},
		{
			name:   "valid: health and tiers as the README shows them",
			health: "{http: {port: 8080, path: /healthz}, interval: 1s, timeout: 1s, min_healthy: 10s, deadline: 5m}",
			tiers:  "tiers:\n  1: {max_parallel: 1, max_failed: 0, bake: 5m}\n  2: {max_parallel: \"25%\", max_failed: \"10%\", bake: 0s}\n",
		},
	})
}

// A tier whose machines' tiers could not all be read is not said to be
// empty, nor its budget too large: a machine may be on it.
func TestTierProblemsWithUnreadableTiers(t *testing.T) {
	src := fmt.Sprintf(healthMesh, "{}", "tiers:\n  1: {max_failed: 1}\n  3: {}\n")
	src = strings.Replace(src, "tier: 1, modules: [host]}\n  edge-2", "tier: three, modules: [host]}\n  edge-2", 1)
	assert.Equal(t, []Problem{{"machines.edge-1.tier", `must be a non-negative integer, got "three" (line 8)`}}, problemsOf(t, src))
}

func TestTiersBuiltInCode(t *testing.T) {
	c := Default()
	c.Modules["host"] = Module{Repo: "."}
	c.Machines["edge-1"] = Machine{Host: "http://127.0.0.1:7401", Tier: 1, Modules: []string{"host"}}
	c.Tiers[1] = TierPolicy{}
	assert.EqualError(t, c.Validate(), "mesh config: 1 problem:\n  tiers.1.max_parallel: must be at least 1 machine or 1%, got 0")

	c.Tiers[1] = DefaultTierPolicy()
	assert.NoError(t, c.Validate())
}
