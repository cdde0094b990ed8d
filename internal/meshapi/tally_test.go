package meshapi

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// tierOf is a tier of machines in the given states, named m0, m1, ...; a
// state of WaitingTurnWord is a push waiting for room in the window.
func tierOf(states ...string) TierState {
	t := TierState{Tier: 1}
	for i, s := range states {
		m := MachineProgress{Machine: fmt.Sprintf("m%d", i), State: MachineStatus(s)}
		if s == WaitingTurnWord {
			m.State, m.Reason = MachinePushing, WaitsItsTurn+": the plan has 1000 pushes handed over and unanswered at most"
		}
		t.Machines = append(t.Machines, m)
	}
	return t
}

func TestTierCounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tier   TierState
		words  string
		named  []string
		more   int
		atMost int
	}{
		{name: "none", tier: tierOf(), words: "0 machines", atMost: 5},
		{name: "one", tier: tierOf("converged"), words: "1 machine, converged", atMost: 5},
		{name: "all in one state", tier: tierOf("waiting", "waiting", "waiting"), words: "3 machines, all waiting", atMost: 5},
		{
			name:  "what needs a person first, then where the rest are going, then how they ended",
			tier:  tierOf("converged", "pushing", WaitingTurnWord, "failed", "converged", "waiting", "skipped", WaitingTurnWord),
			words: "8 machines: 1 failed, 1 pushing, 2 waiting-turn, 1 waiting, 2 converged, 1 skipped",
			named: []string{"m3=failed"}, atMost: 5,
		},
		{
			name:  "put back and refused are named too, the first few",
			tier:  tierOf("reverted", "refused", "converged", "failed", "reverting"),
			words: "5 machines: 1 failed, 1 refused, 1 reverting, 1 reverted, 1 converged",
			named: []string{"m0=reverted", "m1=refused"}, more: 2, atMost: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.words, tc.tier.CountWords())
			named, more := tc.tier.ToLookAt(tc.atMost)
			assert.Equal(t, tc.named, named)
			assert.Equal(t, tc.more, more)
			total := 0
			for _, c := range tc.tier.Counts() {
				total += c.N
			}
			assert.Equal(t, len(tc.tier.Machines), total, "every machine counted once")
		})
	}
}

// A plan's summary keeps a tier of up to SummaryListsUpTo machines whole
// and stands for a larger one by its counts and its first machines to
// look at, which read as the whole tier reads; the plan's own state is
// left as it was.
func TestPlanSummarised(t *testing.T) {
	var states []string
	for i := range 40 {
		switch {
		case i%7 == 4:
			states = append(states, "failed")
		case i == 30:
			states = append(states, "reverted")
		case i > 30:
			states = append(states, WaitingTurnWord)
		default:
			states = append(states, "converged")
		}
	}
	large := tierOf(states...)
	large.Tier = 2
	small := tierOf("converged", "failed")
	st := PlanState{Plan: "plan/host/x", Tiers: []TierState{small, large}}

	sum := st.Summarised()
	assert.True(t, sum.IsSummary())
	assert.False(t, st.IsSummary())
	assert.Equal(t, small, sum.Tiers[0], "a small tier whole")
	assert.Nil(t, sum.Tiers[0].Summary)

	got := sum.Tiers[1]
	if assert.NotNil(t, got.Summary) {
		assert.Equal(t, 40, got.Summary.Machines)
		assert.Equal(t, 7, got.Summary.ToLookAt)
	}
	assert.Equal(t, large.Size(), got.Size())
	assert.Equal(t, large.Counts(), got.Counts())
	assert.Equal(t, "40 machines: 6 failed, 7 waiting-turn, 1 reverted, 26 converged", got.CountWords())
	assert.Equal(t, large.CountWords(), got.CountWords())
	for _, n := range []int{2, SummaryNames} {
		wantNamed, wantMore := large.ToLookAt(n)
		named, more := got.ToLookAt(n)
		assert.Equal(t, wantNamed, named, "first %d named", n)
		assert.Equal(t, wantMore, more, "more than %d", n)
	}
	assert.Len(t, got.Machines, SummaryNames, "only the first machines to look at")
	assert.Len(t, st.Tiers[1].Machines, 40, "the state summarised is left whole")
	assert.Equal(t, sum, sum.Summarised(), "a summary summarised again is the same")
}
