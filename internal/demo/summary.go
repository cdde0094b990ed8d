package demo

import (
	"time"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// Summary is what a run showed; it is `starter demo --output json`.
type Summary struct {
	// TaskQueue is the demo worker's task queue.
	TaskQueue string `json:"task_queue"`
	// Dir is the scratch directory, when it was kept.
	Dir string `json:"dir,omitempty"`
	// Plans are the demo's plans in the order they were started.
	Plans []Plan `json:"plans"`
	// Rebased is what the host plan reports rebasing on the control node.
	Rebased []string `json:"rebased"`
	// ControlPlane is the controller on the control node: what the stale
	// host plan recorded (Before) and what runs at the end (After).
	ControlPlane ControlPlane `json:"control_plane"`
	// Journals are each machine's latest journal entries, newest first.
	Journals map[string][]JournalLine `json:"journals"`
}

// Plan is one plan of the demo.
type Plan struct {
	ID         string             `json:"id"`
	Module     string             `json:"module"`
	Commit     string             `json:"commit"`
	State      meshapi.PlanStatus `json:"state"`
	Reason     string             `json:"reason,omitempty"`
	Digest     string             `json:"digest,omitempty"`
	Generation int64              `json:"generation,omitempty"`
}

// ControlPlane compares the controller the host plan recorded for the
// control node with the one running there at the end.
type ControlPlane struct {
	Machine string `json:"machine"`
	Module  string `json:"module"`
	// Before is the controller the host plan composed, and recorded, while
	// controller v1 ran.
	Before Version `json:"before"`
	// After is the controller the control node reports running at the end.
	After Version `json:"after"`
	// Downgraded is true when After is older than the newest controller
	// rolled out.
	Downgraded bool `json:"downgraded"`
}

// Version is one build of a module.
type Version struct {
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
	Plan       string `json:"plan,omitempty"`
}

// JournalLine is one journal entry as the demo shows it.
type JournalLine struct {
	Index   uint64    `json:"index"`
	Time    time.Time `json:"time"`
	Outcome string    `json:"outcome"`
	Seq     uint64    `json:"seq"`
	Plan    string    `json:"plan,omitempty"`
	// Containers are module=digest (short).
	Containers []string `json:"containers,omitempty"`
	Message    string   `json:"message,omitempty"`
}
