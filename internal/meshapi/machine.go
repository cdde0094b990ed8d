package meshapi

import "github.com/meshroll/meshroll/internal/mesh"

// MachineInput starts (or continues) a machine workflow.
type MachineInput struct {
	Machine string `json:"machine"`
	// LastSeq is the last sequence this workflow sent.
	LastSeq uint64 `json:"last_seq"`
	// Queue carries waiting requests across continue-as-new.
	Queue []PushRequest `json:"queue,omitempty"`
	// Recent keeps the latest answers so a re-delivered request is answered
	// again instead of pushed twice.
	Recent []PushResult `json:"recent,omitempty"`
	// ContinueAfter, when positive, continues-as-new after that many handled
	// requests even if the server has not suggested it (tests, tuning).
	ContinueAfter int `json:"continue_after,omitempty"`
	// SignalBudget, when positive, is how many signals one run takes before
	// it continues as new, in place of the default (tests); carried across
	// continue-as-new.
	SignalBudget int `json:"signal_budget,omitempty"`
	// Floor carries the workflow's floor record across continue-as-new.
	Floor map[string]mesh.Container `json:"floor,omitempty"`
	// Running carries the last declaration the workflow found running
	// healthy across continue-as-new.
	Running *mesh.Declaration `json:"running,omitempty"`
	// Retired carries a retirement across continue-as-new: the run ends
	// once its queue is empty.
	Retired *Retire `json:"retired,omitempty"`
}

// MachineState answers the machine workflow's query.
type MachineState struct {
	Machine string          `json:"machine"`
	LastSeq uint64          `json:"last_seq"`
	Current *QueuedRequest  `json:"current,omitempty"`
	Queue   []QueuedRequest `json:"queue"`
	Recent  []PushResult    `json:"recent"`
	// Floor is, per module, the newest container that ran healthy here
	// by this workflow's own record.
	Floor map[string]mesh.Container `json:"floor,omitempty"`
	// HostLostState, when set, says when the host was last found to have
	// lost its state.
	HostLostState string `json:"host_lost_state,omitempty"`
	// Running is the last declaration a push of this workflow found
	// running healthy: what the machine runs by the workflow's record
	// (the host's own report may be newer, if something else changed it).
	Running *mesh.Declaration `json:"running,omitempty"`
	// BudgetWait, when set, says the push of Current waits for a place in
	// the fleet budget, and behind whom, as the budget said when the wait
	// began; BudgetWorkflow is the budget's workflow, which a reader asks
	// for the words as they are now (plans.MachineState does).
	BudgetWait     string `json:"budget_wait,omitempty"`
	BudgetWorkflow string `json:"budget_workflow,omitempty"`
}

// MemoMachine is the memo key under which a machine workflow keeps its
// MachineSummary, so that the overviews (status, machine list, the fleet
// page) read every machine in one paged visibility list instead of one
// query per machine workflow, which at ten thousand machines takes tens of
// seconds and needs a worker to answer each.
const MemoMachine = "machine"

// MachineSummary is the part of MachineState an overview shows: what a
// machine workflow is pushing and how much waits. The workflow publishes it
// in its memo whenever it changes; the visibility store has it a moment
// later (under a second on a healthy cluster).
type MachineSummary struct {
	Machine string `json:"machine"`
	LastSeq uint64 `json:"last_seq"`
	// Queue is how many requests wait; Rollbacks how many of them restore a
	// known-good build (first in line).
	Queue     int            `json:"queue"`
	Rollbacks int            `json:"rollbacks,omitempty"`
	Current   *QueuedRequest `json:"current,omitempty"`
}

// Summary is the overview's part of the state.
func (s MachineState) Summary() MachineSummary {
	sum := MachineSummary{Machine: s.Machine, LastSeq: s.LastSeq, Queue: len(s.Queue), Current: s.Current}
	for _, r := range s.Queue {
		if r.Rollback {
			sum.Rollbacks++
		}
	}
	return sum
}

// Equal says whether two summaries show the same: the workflow publishes
// only a summary that differs from the last it published.
func (s MachineSummary) Equal(o MachineSummary) bool {
	if (s.Current == nil) != (o.Current == nil) || s.Current != nil && *s.Current != *o.Current {
		return false
	}
	s.Current, o.Current = nil, nil
	return s == o
}

// QueuedRequest is a request as the machine query shows it.
type QueuedRequest struct {
	Request    string `json:"request"`
	Plan       string `json:"plan"`
	Module     string `json:"module"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
	// Rollback marks a request that restores a known-good build (a
	// rollback's push or a put-back after failed analysis): the machine
	// serves it first in line, before every merge push waiting.
	Rollback bool `json:"rollback,omitempty"`
}
