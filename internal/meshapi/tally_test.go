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
