// Package meshapi is the one place where the names and shapes that cross a
// process boundary live: task queue, workflow types and IDs, signal, update and
// query names, the typed inputs and results of every workflow, activity and
// message, and the stable error types tests and callers match on. Workflows,
// activities, the worker and the starter all import it, so a rename is a
// compile error instead of a silently zero-valued payload.
package meshapi

import (
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// DefaultTaskQueue is where the worker polls unless the config says otherwise.
const DefaultTaskQueue = "meshroll"

// Workflow type names. They are registered explicitly so that renaming a Go
// function never orphans a running plan.
const (
	PlanWorkflowType    = "Plan"
	MachineWorkflowType = "Machine"
)

// Message names.
const (
	// SignalPush carries a PushRequest from a plan (through the EnqueuePushes
	// activity's signal-with-start) to a machine workflow.
	SignalPush = "push"
	// SignalCancelPush carries a CancelPush from a plan that no longer wants
	// its queued request.
	SignalCancelPush = "cancel-push"
	// SignalPushResult carries a PushResult from a machine workflow back to
	// the plan that asked.
	SignalPushResult = "push-result"

	UpdateApprove = "approve"
	UpdatePause   = "pause"
	UpdateResume  = "resume"
	UpdateAbort   = "abort"

	// QueryState answers PlanState on a plan and MachineState on a machine.
	QueryState = "state"
)

// Stable error types of non-retryable application errors.
const (
	ErrInvalidInput     = "InvalidInput"
	ErrUnknownModule    = "UnknownModule"
	ErrUnknownMachine   = "UnknownMachine"
	ErrUnknownDigest    = "UnknownDigest"
	ErrDowngradeRefused = "DowngradeRefused"
	ErrHostRefused      = "HostRefused"
	ErrSequenceRefused  = "SequenceRefused"
	ErrUnhealthy        = "ContainerUnhealthy"
	ErrBuildFailed      = "BuildFailed"
	ErrNotGated         = "NotGated"
	ErrPlanFinished     = "PlanFinished"
)

const (
	planPrefix    = "plan/"
	machinePrefix = "machine/"
)

// PlanID is the plan workflow's ID for a merge. It is made only from module
// and commit so that a re-delivered merge finds the plan it already started.
func PlanID(module, commit string) string { return planPrefix + module + "/" + commit }

// MachineID is the ID of the machine's long-running workflow, the only writer
// to that machine's host.
func MachineID(machine string) string { return machinePrefix + machine }

// MachineFromID returns the machine name in a machine workflow ID.
func MachineFromID(id string) (string, bool) {
	return strings.CutPrefix(id, machinePrefix)
}

// Plan phases and outcomes (PlanState.State). The last five are terminal.
const (
	PlanBuilding   = "building"
	PlanComposing  = "composing"
	PlanPushing    = "pushing"
	PlanGated      = "gated"
	PlanPaused     = "paused"
	PlanConverged  = "converged"
	PlanSuperseded = "superseded"
	PlanHalted     = "halted"
	PlanRefused    = "refused"
	PlanAborted    = "aborted"
)

// PlanTerminal reports whether state is one a plan ends in.
func PlanTerminal(state string) bool {
	switch state {
	case PlanConverged, PlanSuperseded, PlanHalted, PlanRefused, PlanAborted:
		return true
	}
	return false
}

// Tier states (TierState.State).
const (
	TierWaiting   = "waiting"
	TierGated     = "gated"
	TierPushing   = "pushing"
	TierConverged = "converged"
	TierHalted    = "halted"
	TierSkipped   = "skipped"
)

// Machine outcomes within a plan (MachineProgress.State) and of a push
// (PushResult.Outcome).
const (
	MachineWaiting    = "waiting"
	MachinePushing    = "pushing"
	MachineConverged  = "converged"
	MachineSuperseded = "superseded"
	MachineRefused    = "refused"
	MachineFailed     = "failed"
	MachineCancelled  = "cancelled"
)

// PushPolicy bounds one push. It travels in workflow inputs so that a plan
// keeps the policy it started with.
type PushPolicy struct {
	// RunningTimeout is how long the host may take to report the declared
	// containers running after it accepted the declaration.
	RunningTimeout time.Duration `json:"running_timeout"`
	// RetryBudget is how long an unreachable host is retried before the push
	// fails and its tier halts.
	RetryBudget time.Duration `json:"retry_budget"`
}

// DefaultPushPolicy is used where a policy field is zero.
var DefaultPushPolicy = PushPolicy{RunningTimeout: 5 * time.Minute, RetryBudget: 2 * time.Minute}

// WithDefaults fills zero fields from DefaultPushPolicy.
func (p PushPolicy) WithDefaults() PushPolicy {
	if p.RunningTimeout <= 0 {
		p.RunningTimeout = DefaultPushPolicy.RunningTimeout
	}
	if p.RetryBudget <= 0 {
		p.RetryBudget = DefaultPushPolicy.RetryBudget
	}
	return p
}

// PlanInput starts a plan: one merge of one module.
type PlanInput struct {
	Module string `json:"module"`
	Commit string `json:"commit"`
	// Gates are push tiers that wait for an operator's approval before they
	// start.
	Gates  []int      `json:"gates,omitempty"`
	Policy PushPolicy `json:"policy"`
	// Force lets the pushes pass an unknown running digest or the host's
	// floor; the host journals it. Operators only.
	Force bool `json:"force,omitempty"`
}

// PlanState is the plan's account of itself: the query result while it runs
// and the workflow result when it ends.
type PlanState struct {
	Plan   string      `json:"plan"`
	Module string      `json:"module"`
	Commit string      `json:"commit"`
	State  string      `json:"state"`
	Reason string      `json:"reason,omitempty"`
	Build  *mesh.Build `json:"build,omitempty"`
	Gates  []int       `json:"gates,omitempty"`
	Paused bool        `json:"paused,omitempty"`
	Tiers  []TierState `json:"tiers"`
}

// Machine returns the progress of one machine of the plan, whatever its
// tier.
func (s PlanState) Machine(name string) (MachineProgress, bool) {
	for _, t := range s.Tiers {
		for _, m := range t.Machines {
			if m.Machine == name {
				return m, true
			}
		}
	}
	return MachineProgress{}, false
}

// TierState is one push tier of a plan.
type TierState struct {
	Tier     int               `json:"tier"`
	State    string            `json:"state"`
	Machines []MachineProgress `json:"machines"`
}

// MachineProgress is one machine within a plan's tier.
type MachineProgress struct {
	Machine string `json:"machine"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	// Rebased names the containers recomposed at send time from what the
	// machine ran, because the plan's composed copy was older.
	Rebased []string `json:"rebased,omitempty"`
}

// ApproveInput opens a gate.
type ApproveInput struct {
	// Tier to approve, ahead of time or now; nil means the gate the plan is
	// waiting at now.
	Tier *int   `json:"tier,omitempty"`
	By   string `json:"by,omitempty"`
}

// PauseInput holds a plan before its next tier.
type PauseInput struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ResumeInput lets a paused plan go on.
type ResumeInput struct {
	By string `json:"by,omitempty"`
}

// AbortInput ends a plan: queued pushes leave their machines' queues, later
// tiers are untouched.
type AbortInput struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ControlResult answers approve, pause, resume and abort.
type ControlResult struct {
	State string `json:"state"`
}

// Target is one machine a plan pushes.
type Target struct {
	Machine string   `json:"machine"`
	Tier    int      `json:"tier"`
	Modules []string `json:"modules"`
}

// TargetsInput asks the worker's mesh config which machines run a module.
type TargetsInput struct {
	Module string `json:"module"`
}

// TargetsResult lists them sorted by tier, then name.
type TargetsResult struct {
	Targets []Target `json:"targets"`
}

// BuildInput builds a module at a commit.
type BuildInput struct {
	Plan   string `json:"plan"`
	Module string `json:"module"`
	Commit string `json:"commit"`
}

// ComposeInput composes one machine's declaration with the plan's build
// pinned.
type ComposeInput struct {
	Plan   string     `json:"plan"`
	Target Target     `json:"target"`
	Build  mesh.Build `json:"build"`
}

// ComposeResult is what the plan intends for that machine.
type ComposeResult struct {
	Declaration mesh.Declaration `json:"declaration"`
	// Unknown names running digests the catalogue does not know; their
	// containers carry generation 0 and the push refuses them unless forced.
	Unknown []string `json:"unknown,omitempty"`
}

// PushRequest asks a machine workflow to push a declaration.
type PushRequest struct {
	// Request is unique per plan and machine; duplicates are ignored.
	Request string `json:"request"`
	// Plan is the plan workflow's ID; the answer is signalled there.
	Plan        string           `json:"plan"`
	Machine     string           `json:"machine"`
	Build       mesh.Build       `json:"build"`
	Declaration mesh.Declaration `json:"declaration"`
	Policy      PushPolicy       `json:"policy"`
	Force       bool             `json:"force,omitempty"`
}

// RequestID is the push request ID a plan uses for a machine.
func RequestID(plan, machine string) string { return plan + "@" + machine }

// PushResult answers a PushRequest.
type PushResult struct {
	Request string `json:"request"`
	Plan    string `json:"plan"`
	Machine string `json:"machine"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Seq is the declaration sequence sent (0 when nothing was sent).
	Seq     uint64   `json:"seq,omitempty"`
	Rebased []string `json:"rebased,omitempty"`
}

// CancelPush withdraws a queued request.
type CancelPush struct {
	Request string `json:"request"`
	Reason  string `json:"reason,omitempty"`
}

// EnqueueInput hands a tier's requests to their machine workflows.
type EnqueueInput struct {
	Requests []PushRequest `json:"requests"`
}

// EnqueueResult says how many were handed over.
type EnqueueResult struct {
	Enqueued int `json:"enqueued"`
}

// PushInput is one push attempt from the machine workflow: the request and
// the sequence the workflow proposes.
type PushInput struct {
	Request PushRequest `json:"request"`
	Seq     uint64      `json:"seq"`
}

// PushOutcome is what the push activity did. Permanent failures arrive as
// non-retryable application errors carrying a PushOutcome as details.
type PushOutcome struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Seq is the sequence sent; it may be above the proposed one when the
	// host reported a higher last sequence.
	Seq         uint64           `json:"seq,omitempty"`
	Sent        bool             `json:"sent"`
	Rebased     []string         `json:"rebased,omitempty"`
	Declaration mesh.Declaration `json:"declaration"`
}

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
}

// MachineState answers the machine workflow's query.
type MachineState struct {
	Machine string          `json:"machine"`
	LastSeq uint64          `json:"last_seq"`
	Current *QueuedRequest  `json:"current,omitempty"`
	Queue   []QueuedRequest `json:"queue"`
	Recent  []PushResult    `json:"recent"`
}

// QueuedRequest is a request as the machine query shows it.
type QueuedRequest struct {
	Request    string `json:"request"`
	Plan       string `json:"plan"`
	Module     string `json:"module"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
}
