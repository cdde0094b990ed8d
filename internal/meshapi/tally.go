package meshapi

import (
	"fmt"
	"slices"
	"strings"
)

// StateCount is how many of a tier's machines read one state word
// (MachineProgress.StateWord).
type StateCount struct {
	State string `json:"state"`
	N     int    `json:"n"`
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
	if t.Summary != nil {
		return t.Summary.Counts
	}
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
	n := t.Size()
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
// Of a summarised tier it names those the summary kept (SummaryNames).
func (t TierState) ToLookAt(n int) (named []string, more int) {
	all := 0
	for _, m := range t.Machines {
		if !m.NeedsNaming() {
			continue
		}
		all++
		if len(named) < n {
			named = append(named, m.Machine+"="+m.StateWord())
		}
	}
	if t.Summary != nil {
		all = t.Summary.ToLookAt
	}
	return named, all - len(named)
}

// Size is how many machines the tier has, summarised or not.
func (t TierState) Size() int {
	if t.Summary != nil {
		return t.Summary.Machines
	}
	return len(t.Machines)
}

// SummaryListsUpTo is the most machines a tier of a plan's summary
// (PlanState.Summarised) lists one by one: the CLI names each machine of
// such a tier on its progress line.
const SummaryListsUpTo = 20

// SummaryNames is how many of a summarised tier's machines to look at
// (NeedsNaming) the summary keeps, in the tier's order: as many as a
// progress line names.
const SummaryNames = 5

// TierSummary stands for a large tier's machines in a plan's summary
// (PlanState.Summarised): their counts, which is all that following a
// plan shows of a tier of thousands, without a row per machine.
type TierSummary struct {
	// Machines is how many the tier has.
	Machines int          `json:"machines"`
	Counts   []StateCount `json:"counts"`
	// Groups is the tier's GroupCounts (without FailedMachines), for a
	// tier pushed by group.
	Groups map[string]GroupCount `json:"groups,omitempty"`
	// ToLookAt is how many of its machines need naming (NeedsNaming),
	// of which the tier's Machines keep the first SummaryNames.
	ToLookAt int `json:"to_look_at,omitempty"`
}

// Summarised is the plan's state with every tier of more than
// SummaryListsUpTo machines standing as its counts (TierSummary) and its
// first SummaryNames machines to look at: what the plan's QuerySummary
// answers, so that following a plan of ten thousand machines twice a
// second moves its counts, not every machine's row. The plan's own state
// is never summarised; plan show and every check that reads machines read
// the whole state (QueryState).
func (s PlanState) Summarised() PlanState {
	out := s
	out.Tiers = make([]TierState, len(s.Tiers))
	for i, t := range s.Tiers {
		out.Tiers[i] = t
		if len(t.Machines) <= SummaryListsUpTo || t.Summary != nil {
			continue
		}
		sum := &TierSummary{Machines: len(t.Machines), Counts: t.Counts()}
		if t.Policy != nil && len(t.Policy.Groups) > 0 {
			sum.Groups = map[string]GroupCount{}
			for g, c := range t.GroupCounts() {
				sum.Groups[g] = GroupCount{Done: c.Done, Failed: c.Failed}
			}
		}
		var kept []MachineProgress
		for _, m := range t.Machines {
			if !m.NeedsNaming() {
				continue
			}
			sum.ToLookAt++
			if len(kept) < SummaryNames {
				kept = append(kept, m)
			}
		}
		out.Tiers[i].Machines, out.Tiers[i].Summary = kept, sum
	}
	return out
}

// IsSummary says whether any of the state's tiers is summarised: its
// machines are not all there (see Summarised).
func (s PlanState) IsSummary() bool {
	for _, t := range s.Tiers {
		if t.Summary != nil {
			return true
		}
	}
	return false
}
