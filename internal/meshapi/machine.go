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
	// the fleet budget, and behind whom.
	BudgetWait string `json:"budget_wait,omitempty"`
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
