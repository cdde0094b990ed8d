package meshapi

import (
	"fmt"
	"slices"
	"strings"
)

// StateCount is how many of a tier's machines read one state word
// (MachineProgress.StateWord).
type StateCount struct {
	State string
	N     int
}

// stateOrder ranks a machine's states in a plan, as StateWord words them,
// for a tier's counts: what needs a person first, then where the rest are
// going, then how they ended.
var stateOrder = []string{
	string(MachineFailed), string(MachineRefused), string(MachineReverting), string(MachinePushing),
	WaitingTurnWord, string(MachineWaiting), string(MachineReverted), string(MachineConverged),
	string(MachineSuperseded), string(MachineCancelled), string(MachineSkipped),
}

// StateWords is every word a machine's state in a plan reads as
// (MachineProgress.StateWord), in the order counts list them: what a
// filter by state may name.
func StateWords() []string { return slices.Clone(stateOrder) }

// Counts is the tier's machines counted by state word, in stateOrder, the
// states none is in left out: how the fleet page, the CLI and the Web UI's
// details show a tier of thousands, where a name per machine would bury
// the few that matter. It walks the tier once: callers count per view,
// never per answer.
func (t TierState) Counts() []StateCount {
	by := make(map[string]int, len(stateOrder))
	for _, m := range t.Machines {
		by[m.StateWord()]++
	}
	out := make([]StateCount, 0, len(by))
	for _, s := range stateOrder {
		if n := by[s]; n > 0 {
			out = append(out, StateCount{State: s, N: n})
		}
	}
	return out
}

// CountWords is the tier's counts in words: "3333 machines: 7 failed, 521
// pushing, 2000 waiting-turn, 805 converged", and "3333 machines, all
// converged" or "1 machine, waiting" when they are all in one state.
func (t TierState) CountWords() string {
	counts := t.Counts()
	n := len(t.Machines)
	switch {
	case len(counts) == 0:
		return "0 machines"
	case n == 1:
		return "1 machine, " + counts[0].State
	case len(counts) == 1:
		return fmt.Sprintf("%d machines, all %s", n, counts[0].State)
	}
	words := make([]string, 0, len(counts))
	for _, c := range counts {
		words = append(words, fmt.Sprintf("%d %s", c.N, c.State))
	}
	return fmt.Sprintf("%d machines: %s", n, strings.Join(words, ", "))
}

// toLookAt are the states whose machines a person reading a tier's counts
// needs named too: failed, refused, being or having been put back.
var toLookAt = []MachineStatus{MachineFailed, MachineRefused, MachineReverting, MachineReverted}

// ToLookAtStates is toLookAt as plan show's --machines flag takes them
// ("failed,refused,reverting,reverted"), for the words that point a
// person from a count to the machines.
func ToLookAtStates() string {
	words := make([]string, len(toLookAt))
	for i, s := range toLookAt {
		words[i] = string(s)
	}
	return strings.Join(words, ",")
}

// NeedsNaming says whether a person reading a tier's counts needs the
// machine named too (toLookAt).
func (m MachineProgress) NeedsNaming() bool { return slices.Contains(toLookAt, m.State) }

// ToLookAt is the first n of the tier's machines a person must look at
// (NeedsNaming), each as "edge-7=failed", and how many more there are.
func (t TierState) ToLookAt(n int) (named []string, more int) {
	for _, m := range t.Machines {
		if !m.NeedsNaming() {
			continue
		}
		if len(named) < n {
			named = append(named, m.Machine+"="+m.StateWord())
		} else {
			more++
		}
	}
	return named, more
}
