package host

import (
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// PathJournal is the agent's journal: every declaration it judged and every
// container transition, newest first, paged by entry index.
const PathJournal = "/v1/journal"

// JournalMerge is the merge a plan rolls out, read from the plan ID, so that the
// journal answers "which merge put this here" without a Temporal lookup.
type JournalMerge struct {
	Module string `json:"module"`
	Commit string `json:"commit"`
}

// JournalEntry is one line of the journal: what the agent was told, by whom, and
// what it did. It is the record that lets an operator answer "which plan put
// this digest here, and was it forced" long after the fact.
type JournalEntry struct {
	// Index is the entry's position in the journal, from 1. It is the
	// paging cursor: declaration sequences are not one, since a refused
	// stale declaration carries a sequence below ones already journalled.
	Index uint64 `json:"index"`
	// Time is when the agent wrote the entry (UTC).
	Time time.Time `json:"time"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Code and Message are the refusal as the caller got it (OutcomeRefused),
	// or why a container failed.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Machine is the machine the declaration was addressed to.
	Machine string `json:"machine"`
	// Seq is the declaration's sequence (for container outcomes, the
	// sequence that put the container there).
	Seq uint64 `json:"seq"`
	// LastSeq is the last sequence applied once this entry was written.
	LastSeq uint64 `json:"last_seq"`
	// Plan is the plan workflow that sent the declaration.
	Plan string `json:"plan,omitempty"`
	// Request is the push request within the machine workflow.
	Request string `json:"request,omitempty"`
	// JournalMerge is the merge named by Plan, when Plan is a plan ID.
	Merge *JournalMerge `json:"merge,omitempty"`
	// Force is the declaration's force flag, journalled whether or not it
	// overrode anything.
	Force bool `json:"force,omitempty"`
	// ForcedPast is the downgrade refusal Force or Rollback overrode, when
	// it did.
	ForcedPast string `json:"forced_past,omitempty"`
	// Revert and Reason are the declaration's: a revert puts the machine
	// back on what it ran before Plan, whose build failed here as Reason
	// says (the one downgrade a plan makes, so the journal names it); on
	// the first declaration to a host that lost its state, Reason says so.
	Revert bool `json:"revert,omitempty"`
	// Rollback is the declaration's: an operator's rollback plan took the
	// machine below its floor, Reason saying who and why.
	Rollback bool   `json:"rollback,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Containers is every container the declaration named, digests and
	// settings as told; for a container outcome, that one container.
	Containers []mesh.Container `json:"containers,omitempty"`
	// Ports are the loopback ports the agent chose, by module, for the
	// containers among Containers whose probe port is mesh.PortAuto (each
	// finds its own in mesh.EnvPort).
	Ports map[string]int `json:"ports,omitempty"`
	// Runtime is the runtime that was to run them.
	Runtime string `json:"runtime"`
}

// JournalPage is one page of the journal as GET /v1/journal answers it.
type JournalPage struct {
	Machine string `json:"machine"`
	Runtime string `json:"runtime"`
	// Entries are newest first.
	Entries []JournalEntry `json:"entries"`
	// NextBefore is the before= that fetches the next older page; 0 when
	// there is none.
	NextBefore uint64 `json:"next_before"`
}
