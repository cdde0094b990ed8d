package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// withPolicies makes the harness's targets carry tier policies, as the
// Targets activity resolves them from the mesh config.
func (h *planHarness) withPolicies(ps ...meshapi.TierPolicy) {
	h.targetsFn = func() (meshapi.TargetsResult, error) {
		return meshapi.TargetsResult{Targets: h.targets, Tiers: ps}, nil
	}
}

// failing answers the named machines failed, the others converged.
func failing(machines ...string) func(string) *meshapi.PushResult {
	return func(m string) *meshapi.PushResult {
		for _, f := range machines {
			if f == m {
				return &meshapi.PushResult{Outcome: meshapi.MachineFailed, Reason: "host (sha256:…) is crash-looping"}
			}
		}
		return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 1}
	}
}

// TestPlanPushesTiersByPolicy pushes a tier by its policy: batches of
// max_parallel, the failure budget of max_failed, and, for a tier with
// group_by, both within each group (the cases on fiveOnTwoSites).
func TestPlanPushesTiersByPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		targets  []meshapi.Target
		policy   meshapi.TierPolicy
		failing  []string
		batches  [][]string // machines handed out per HandPushes call, in order
		state    meshapi.PlanStatus
		reason   string // a substring of the plan's reason
		failedIn int    // the tier's Failed count
	}{
		{
			name:    "max_parallel 1: one machine at a time, in order",
			targets: tier(1, "e1", "e2", "e3"),
			policy:  meshapi.TierPolicy{Tier: 1, MaxParallel: 1},
			batches: [][]string{{"e1"}, {"e2"}, {"e3"}},
			state:   meshapi.PlanConverged,
		},
		{
			name:    "max_parallel 2 of 3",
			targets: tier(1, "e1", "e2", "e3"),
			policy:  meshapi.TierPolicy{Tier: 1, MaxParallel: 2},
			batches: [][]string{{"e1", "e2"}, {"e3"}},
			state:   meshapi.PlanConverged,
		},
		{
			name:     "a failure within max_failed: the tier goes on, the plan converges naming it",
			targets:  tier(1, "e1", "e2", "e3", "e4"),
			policy:   meshapi.TierPolicy{Tier: 1, MaxFailed: 1},
			failing:  []string{"e2"},
			batches:  [][]string{{"e1", "e2", "e3", "e4"}},
			state:    meshapi.PlanConverged,
			reason:   "host generation 7 runs on 3 machines (0 already ran newer); failed within their tier's budget and put back on what they ran (1): e2: host (sha256:…) is crash-looping",
			failedIn: 1,
		},
		{
			name:     "one more than max_failed halts",
			targets:  tier(1, "e1", "e2", "e3", "e4"),
			policy:   meshapi.TierPolicy{Tier: 1, MaxFailed: 1},
			failing:  []string{"e2", "e4"},
			batches:  [][]string{{"e1", "e2", "e3", "e4"}},
			state:    meshapi.PlanHalted,
			reason:   "tier 1 halted: 2 of its 4 machines failed, more than the 1 it may lose; later tiers untouched: e2: host (sha256:…) is crash-looping; e4:",
			failedIn: 2,
		},
		{
			name:     "a bad build stops at its first batch: later batches are never pushed",
			targets:  tier(1, "e1", "e2", "e3", "e4"),
			policy:   meshapi.TierPolicy{Tier: 1, MaxParallel: 2},
			failing:  []string{"e1"},
			batches:  [][]string{{"e1", "e2"}},
			state:    meshapi.PlanHalted,
			reason:   "tier 1 halted: 1 of its 4 machines failed, more than the 0 it may lose; its 2 machines not yet pushed and later tiers untouched: e1:",
			failedIn: 1,
		},
		{
			name:     "a batch of eight that all fail: the reason names five and counts the rest",
			targets:  tier(1, "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"),
			policy:   meshapi.TierPolicy{Tier: 1, MaxParallel: 8},
			failing:  []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"},
			batches:  [][]string{{"e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"}},
			state:    meshapi.PlanHalted,
			reason:   "later tiers untouched: e1: host (sha256:…) is crash-looping; e2: host (sha256:…) is crash-looping; e3: host (sha256:…) is crash-looping; e4: host (sha256:…) is crash-looping; e5: host (sha256:…) is crash-looping; and 3 more machines (plan show lists each with its reason)",
			failedIn: 8,
		},
		{
			name:     "seven failures within max_failed: the converged plan names five and counts the rest",
			targets:  tier(1, "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"),
			policy:   meshapi.TierPolicy{Tier: 1, MaxFailed: 7},
			failing:  []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7"},
			batches:  [][]string{{"e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"}},
			state:    meshapi.PlanConverged,
			reason:   "(7): e1: host (sha256:…) is crash-looping; e2: host (sha256:…) is crash-looping; e3: host (sha256:…) is crash-looping; e4: host (sha256:…) is crash-looping; e5: host (sha256:…) is crash-looping; and 2 more machines (plan show lists each with its reason)",
			failedIn: 7,
		},
		{
			name:    "a control-plane machine is pushed alone, after the others",
			targets: []meshapi.Target{{Machine: "control-node", Tier: 1, Alone: true}, {Machine: "e1", Tier: 1}, {Machine: "e2", Tier: 1}},
			policy:  meshapi.TierPolicy{Tier: 1},
			batches: [][]string{{"e1", "e2"}, {"control-node"}},
			state:   meshapi.PlanConverged,
		},
		{
			name:    "max_parallel 1 per site: a machine of each site at a time, sites sorted",
			targets: fiveOnTwoSites,
			policy:  bySite(meshapi.GroupBudget{MaxParallel: 1}, meshapi.GroupBudget{MaxParallel: 1}),
			batches: [][]string{{"m2", "m1"}, {"m5", "m3"}, {"m4"}},
			state:   meshapi.PlanConverged,
		},
		{
			name:    "each group its own max_parallel (a percentage resolved for the group)",
			targets: fiveOnTwoSites,
			policy:  bySite(meshapi.GroupBudget{MaxParallel: 1}, meshapi.GroupBudget{MaxParallel: 2}),
			batches: [][]string{{"m2", "m1", "m3"}, {"m5", "m4"}},
			state:   meshapi.PlanConverged,
		},
		{
			name:     "a failure within its group's budget: the tier goes on, though the tier's own max_failed is 0",
			targets:  fiveOnTwoSites,
			policy:   bySite(meshapi.GroupBudget{MaxParallel: 1, MaxFailed: 1}, meshapi.GroupBudget{MaxParallel: 1}),
			failing:  []string{"m2"},
			batches:  [][]string{{"m2", "m1"}, {"m5", "m3"}, {"m4"}},
			state:    meshapi.PlanConverged,
			reason:   "failed within their tier's budget and put back on what they ran (1): m2:",
			failedIn: 1,
		},
		{
			name:    "a group past its max_failed halts the tier, naming the group and its machines",
			targets: fiveOnTwoSites,
			policy:  bySite(meshapi.GroupBudget{MaxParallel: 1, MaxFailed: 1}, meshapi.GroupBudget{MaxParallel: 2, MaxFailed: 1}),
			failing: []string{"m1", "m3"},
			batches: [][]string{{"m2", "m1", "m3"}},
			state:   meshapi.PlanHalted,
			reason: "tier 1 halted: site=fra1 had 2 failed machines (max_failed 1): m1, m3; its 2 machines not yet pushed and later tiers untouched: " +
				"m1: host (sha256:…) is crash-looping; m3: host (sha256:…) is crash-looping",
			failedIn: 2,
		},
		{
			name:     "failures spread over the groups within each budget do not halt",
			targets:  fiveOnTwoSites,
			policy:   bySite(meshapi.GroupBudget{MaxParallel: 2, MaxFailed: 1}, meshapi.GroupBudget{MaxParallel: 3, MaxFailed: 1}),
			failing:  []string{"m1", "m2"},
			batches:  [][]string{{"m2", "m5", "m1", "m3", "m4"}},
			state:    meshapi.PlanConverged,
			failedIn: 2,
		},
		{
			name:    "a control-plane machine of a group is pushed alone, after the others",
			targets: append([]meshapi.Target{{Machine: "cp", Tier: 1, Alone: true, Group: "site=fra1"}}, fiveOnTwoSites...),
			policy:  bySite(meshapi.GroupBudget{MaxParallel: 2}, meshapi.GroupBudget{MaxParallel: 2}),
			batches: [][]string{{"m2", "m5", "m1", "m3"}, {"m4"}, {"cp"}},
			state:   meshapi.PlanConverged,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newPlanHarness(t, tc.targets...)
			h.withPolicies(tc.policy)
			h.outcome = failing(tc.failing...)
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, tc.state, st.State, st.Reason)
			require.Equal(t, tc.batches, h.enqueued, "batches handed out")
			require.Contains(t, st.Reason, tc.reason)
			require.Equal(t, tc.failedIn, st.Tiers[0].Failed)
		})
	}
}

func TestBatchesOf(t *testing.T) {
	ms := func(names ...string) []meshapi.MachineProgress {
		var out []meshapi.MachineProgress
		for _, n := range names {
			out = append(out, meshapi.MachineProgress{Machine: n})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		machines    []meshapi.MachineProgress
		alone       map[string]bool
		maxParallel int
		want        [][]int
	}{
		{"all at once", ms("a", "b", "c"), nil, 0, [][]int{{0, 1, 2}}},
		{"two at a time", ms("a", "b", "c"), nil, 2, [][]int{{0, 1}, {2}}},
		{"more parallel than machines", ms("a", "b"), nil, 5, [][]int{{0, 1}}},
		{"alone last, on its own", ms("cp", "a", "b"), map[string]bool{"cp": true}, 0, [][]int{{1, 2}, {0}}},
		{"only the alone machine", ms("cp"), map[string]bool{"cp": true}, 0, [][]int{{0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, batchesOf(tc.machines, tc.alone, tc.maxParallel))
		})
	}
}

func TestPlanBakesBetweenTiers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bakeErr error
		state   meshapi.PlanStatus
		reason  string
	}{
		{"a tier that stays healthy through its bake lets the next start", nil, meshapi.PlanConverged, "runs on 3 machines"},
		{"a machine turning unhealthy during the bake halts the plan", temporal.NewNonRetryableApplicationError("e2: host turned unhealthy", meshapi.ErrUnhealthy, nil),
			meshapi.PlanHalted, "tier 1 failed its bake of 5m0s, later tiers untouched: e2: host turned unhealthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newPlanHarness(t, targets(tier(1, "e1", "e2"), tier(2, "cp"))...)
			h.withPolicies(meshapi.TierPolicy{Tier: 1, Bake: 5 * time.Minute}, meshapi.TierPolicy{Tier: 2, Bake: time.Hour})
			var baked []meshapi.BakeInput
			h.env.OnActivity(acts.Bake, mock.Anything, mock.Anything).Return(func(_ context.Context, in meshapi.BakeInput) (meshapi.BakeResult, error) {
				baked = append(baked, in)
				return meshapi.BakeResult{Machines: len(in.Machines)}, tc.bakeErr
			})
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, tc.state, st.State, st.Reason)
			require.Contains(t, st.Reason, tc.reason)
			require.Len(t, baked, 1, "only tier 1 bakes: nothing waits on the last tier")
			require.Equal(t, []string{"e1", "e2"}, baked[0].Machines)
			require.Equal(t, 5*time.Minute, baked[0].Bake)
			if tc.bakeErr != nil {
				require.Equal(t, meshapi.TierHalted, st.Tiers[0].State)
				require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "tier 2 untouched")
				require.Len(t, h.enqueued, 1, "tier 2 never handed out")
			}
		})
	}
}
