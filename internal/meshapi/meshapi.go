// Package meshapi is the one place where the names and shapes that cross a
// process boundary live: task queue, workflow types and IDs, signal, update and
// query names, the typed inputs and results of every workflow, activity and
// message, and the stable error types tests and callers match on. Workflows,
// activities, the worker and the starter all import it, so a rename is a
// compile error instead of a silently zero-valued payload.
package meshapi

import (
	"fmt"
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
	// SignalPush carries a PushRequest from a plan (through the HandPushes
	// local activity's signal-with-start) to a machine workflow.
	SignalPush = "push"
	// SignalCancelPush carries a CancelPush from a plan that no longer wants
	// its queued request.
	SignalCancelPush = "cancel-push"
	// SignalPushResult carries a PushResult back to the plan that asked: the
	// one route by which a plan learns how a push ended. The push activity
	// sends it for a push it carried through; the machine workflow sends it
	// for everything it decides itself (duplicates, supersessions, refusals,
	// failures).
	SignalPushResult = "push-result"

	UpdateApprove = "approve"
	UpdatePause   = "pause"
	UpdateResume  = "resume"
	UpdateAbort   = "abort"

	// QueryState answers PlanState on a plan and MachineState on a machine.
	QueryState = "state"
)

// Stable error types of non-retryable application errors: what tests,
// metrics and callers match on (errors.As and ApplicationError.Type), never
// the message. The refusal types are also the guard's codes (package guard
// returns them as they are) and the labels of the refusals metric; the host
// API's own wire codes map onto them in one place, the push activity.
const (
	// ErrInvalidInput: a plan's input or a declaration is malformed; the
	// same input can never succeed.
	ErrInvalidInput = "InvalidInput"
	// ErrUnknownModule: the module is not in the worker's mesh config.
	ErrUnknownModule = "UnknownModule"
	// ErrUnknownMachine: the machine is not in the worker's mesh config.
	ErrUnknownMachine = "UnknownMachine"
	// ErrUnknownBuild: no build of the module at that commit is in the
	// catalogue (a lever named a commit never built, or a prefix of none).
	ErrUnknownBuild = "UnknownBuild"
	// ErrUnknownDigest: the machine runs a digest the catalogue does not
	// know, and the push was not forced.
	ErrUnknownDigest = "UnknownDigest"
	// ErrDowngradeRefused: sending would lower a container's generation
	// below what the machine runs.
	ErrDowngradeRefused = "DowngradeRefused"
	// ErrRejected: an operator rejected the build (starter build reject,
	// or a rollback from it); it is never sent again, whoever asks.
	ErrRejected = "BuildRejected"
	// ErrHostRefused: the host agent refused the declaration (its floor, an
	// unpinned image, a malformed declaration).
	ErrHostRefused = "HostRefused"
	// ErrSequenceRefused: the host applied a sequence this push did not
	// expect; someone else wrote to it.
	ErrSequenceRefused = "SequenceRefused"
	// ErrUnhealthy: the declared containers did not run.
	ErrUnhealthy = "ContainerUnhealthy"
	// ErrBuildFailed: the build failed in a way a retry cannot fix.
	ErrBuildFailed = "BuildFailed"
	// ErrNotGated: approve named no gate the plan has or waits at.
	ErrNotGated = "NotGated"
	// ErrPlanFinished: a control update reached a plan that has ended.
	ErrPlanFinished = "PlanFinished"
)

const (
	planPrefix    = "plan/"
	machinePrefix = "machine/"
)

// PlanID is the plan workflow's ID for a merge. It is made only from module
// and commit so that a re-delivered merge finds the plan it already started.
func PlanID(module, commit string) string { return planPrefix + module + "/" + commit }

// ParsePlanID splits a plan ID made by PlanID into its module and commit,
// so that a reader holding only the ID (a host's report, a plan started
// before the search attributes existed) can still say which build it was
// for. ok is false for anything PlanID does not make.
func ParsePlanID(id string) (module, commit string, ok bool) {
	rest, ok := strings.CutPrefix(id, planPrefix)
	if !ok {
		return "", "", false
	}
	module, commit, ok = strings.Cut(rest, "/")
	if !ok || module == "" || commit == "" {
		return "", "", false
	}
	return module, commit, true
}

// MachineID is the ID of the machine's long-running workflow, the only writer
// to that machine's host.
func MachineID(machine string) string { return machinePrefix + machine }

// MachineFromID returns the machine name in a machine workflow ID.
func MachineFromID(id string) (string, bool) {
	return strings.CutPrefix(id, machinePrefix)
}

// PlanStatus is where a plan is (PlanState.State): a phase while it runs,
// then the one word it ends in. It is a type of its own so that a tier's or
// a machine's state can never be stored in its place.
type PlanStatus string

// Plan phases and outcomes. The last five are terminal.
const (
	PlanBuilding  PlanStatus = "building"
	PlanComposing PlanStatus = "composing"
	PlanPushing   PlanStatus = "pushing"
	PlanGated     PlanStatus = "gated"
	PlanPaused    PlanStatus = "paused"
	// PlanHeld: a freeze or the deployment windows hold the plan before its
	// next batch; it goes on by itself when they allow.
	PlanHeld       PlanStatus = "held"
	PlanConverged  PlanStatus = "converged"
	PlanSuperseded PlanStatus = "superseded"
	PlanHalted     PlanStatus = "halted"
	PlanRefused    PlanStatus = "refused"
	PlanAborted    PlanStatus = "aborted"
)

// Terminal reports whether a plan ends in s: it then never changes again.
func (s PlanStatus) Terminal() bool {
	switch s {
	case PlanConverged, PlanSuperseded, PlanHalted, PlanRefused, PlanAborted:
		return true
	}
	return false
}

// TierStatus is where one push tier of a plan is (TierState.State).
type TierStatus string

// Tier states.
const (
	TierWaiting TierStatus = "waiting"
	TierGated   TierStatus = "gated"
	TierPushing TierStatus = "pushing"
	TierBaking  TierStatus = "baking"
	// TierAnalysing: the tier's machines are healthy and its analysis
	// checks are being measured (its bake, if any, runs alongside).
	TierAnalysing TierStatus = "analysing"
	TierConverged TierStatus = "converged"
	TierHalted    TierStatus = "halted"
	TierSkipped   TierStatus = "skipped"
)

// MachineStatus is where one machine is within a plan
// (MachineProgress.State), and how a push to it ended (PushResult.Outcome).
type MachineStatus string

// Machine states; converged to cancelled are how a push ends.
const (
	MachineWaiting    MachineStatus = "waiting"
	MachinePushing    MachineStatus = "pushing"
	MachineConverged  MachineStatus = "converged"
	MachineSuperseded MachineStatus = "superseded"
	MachineRefused    MachineStatus = "refused"
	MachineFailed     MachineStatus = "failed"
	MachineCancelled  MachineStatus = "cancelled"
	// MachineSkipped: the plan ended before it pushed the machine (its
	// tier was skipped, or the tier halted before the machine's batch).
	// Nothing was sent to it.
	MachineSkipped MachineStatus = "skipped"
	// MachineReverting: the machine took the build and its tier's
	// analysis failed; the plan is putting it back (through its machine
	// workflow, as a rollback of the one build).
	MachineReverting MachineStatus = "reverting"
	// MachineReverted: put back after its tier's analysis failed.
	MachineReverted MachineStatus = "reverted"
)

// PutBackID is the request ID of the push that puts a machine back after
// its tier's analysis failed: unlike RequestID, so that the machine
// workflow does not take it for a repeat of the plan's push.
func PutBackID(plan, machine string) string { return RequestID(plan, machine) + "#put-back" }

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
	// Rollback, when set, makes the plan a rollback (see Rollback); Commit
	// is then empty until the plan resolves its target.
	Rollback *Rollback `json:"rollback,omitempty"`
	// Sync, when set, makes the plan a sync of one machine (see Sync);
	// Commit is then empty until the plan resolves its build.
	Sync *Sync `json:"sync,omitempty"`
	// OverrideFreeze, when set, lets the plan pass freezes and deployment
	// windows; every declaration carries its words for the host to journal.
	OverrideFreeze *Override `json:"override_freeze,omitempty"`
}

// Validate checks what a plan needs before anything connects: a module name
// and a full commit id. The starter, plans.Start and the plan workflow all
// call it, so a bad merge event is refused in the same words wherever it
// first arrives. Whether the module is in the mesh config is the config's
// to say.
func (in PlanInput) Validate() error {
	if err := mesh.ValidName("module", in.Module); err != nil {
		return err
	}
	if in.OverrideFreeze != nil {
		if err := in.OverrideFreeze.validate(); err != nil {
			return err
		}
	}
	if in.Rollback != nil {
		return in.Rollback.validate()
	}
	if in.Sync != nil {
		return mesh.ValidName("machine", in.Sync.Machine)
	}
	return mesh.ValidCommit(in.Commit)
}

// PlanState is the plan's account of itself: the query result while it runs
// and the workflow result when it ends.
type PlanState struct {
	Plan   string      `json:"plan"`
	Module string      `json:"module"`
	Commit string      `json:"commit"`
	State  PlanStatus  `json:"state"`
	Reason string      `json:"reason,omitempty"`
	Build  *mesh.Build `json:"build,omitempty"`
	Gates  []int       `json:"gates,omitempty"`
	Paused bool        `json:"paused,omitempty"`
	Tiers  []TierState `json:"tiers"`
	// RolledBackFrom names, for a rollback plan, the builds it rolled the
	// machines back from (rejected by it).
	RolledBackFrom string `json:"rolled_back_from,omitempty"`
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
	State    TierStatus        `json:"state"`
	Machines []MachineProgress `json:"machines"`
	// Policy is how the tier is pushed (batches, failure budget, bake).
	Policy *TierPolicy `json:"policy,omitempty"`
	// Batch is the batch being pushed (1-based) of Batches, while the
	// tier is pushing in more than one.
	Batch   int `json:"batch,omitempty"`
	Batches int `json:"batches,omitempty"`
	// Failed counts the tier's machines that failed (within its budget,
	// or the one that halted it).
	Failed int `json:"failed,omitempty"`
	// BakeUntil is when the tier's bake ends, while it bakes.
	BakeUntil *time.Time `json:"bake_until,omitempty"`
	// Analysis is each analysis check the tier waits on, with its
	// measurements so far, once its machines are healthy.
	Analysis []AnalysisCheck `json:"analysis,omitempty"`
}

// Notes is what the tier's policy adds to a line about it, for the Web
// UI's details and the CLI alike: " (batch 2 of 3, 1 failed of 1 allowed,
// until 14:05:00 UTC)", or "" when there is nothing to add.
func (t TierState) Notes() string {
	var notes []string
	if t.Batches > 0 && t.State == TierPushing {
		notes = append(notes, fmt.Sprintf("batch %d of %d", t.Batch, t.Batches))
	}
	if t.Failed > 0 && t.Policy != nil {
		notes = append(notes, fmt.Sprintf("%d failed of %d allowed", t.Failed, t.Policy.MaxFailed))
	}
	if t.BakeUntil != nil {
		notes = append(notes, "until "+t.BakeUntil.UTC().Format("15:04:05 MST"))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

// MachineProgress is one machine within a plan's tier.
type MachineProgress struct {
	Machine string        `json:"machine"`
	State   MachineStatus `json:"state"`
	Reason  string        `json:"reason,omitempty"`
	Seq     uint64        `json:"seq,omitempty"`
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
	State PlanStatus `json:"state"`
}

// Target is one machine a plan pushes.
type Target struct {
	Machine string   `json:"machine"`
	Tier    int      `json:"tier"`
	Modules []string `json:"modules"`
	// Alone marks a machine that is always pushed in a batch of its own:
	// one running the control plane, whose failure is the worst case.
	Alone bool `json:"alone,omitempty"`
}

// TierPolicy is how one tier is pushed, resolved for the tier's size from
// the mesh config when the plan starts, so that the plan keeps it.
type TierPolicy struct {
	Tier int `json:"tier"`
	// MaxParallel is how many of the tier's machines are pushed at once (a
	// batch; the next starts when this one is healthy); 0 is all of them.
	MaxParallel int `json:"max_parallel,omitempty"`
	// MaxFailed is how many of the tier's machines may fail (each put back
	// on what it ran) before the plan halts; one more halts it at once.
	MaxFailed int `json:"max_failed,omitempty"`
	// Bake is how long the tier waits, healthy, before the next tier starts.
	Bake time.Duration `json:"bake,omitempty"`
	// Analysis names the analysis checks (under analysis.checks in the
	// worker's config) that must pass before the tier counts done.
	Analysis []string `json:"analysis,omitempty"`
}

// TargetsInput asks the worker's mesh config which machines run a module.
type TargetsInput struct {
	Module string `json:"module"`
	// Remove names the one machine of a sync that stops the module there
	// (the config no longer gives it the module, so it is not among the
	// module's machines).
	Remove string `json:"remove,omitempty"`
}

// TargetsResult lists them sorted by tier, then name, with each tier's
// policy (a tier without one is pushed all at once, no failure allowed).
type TargetsResult struct {
	Targets []Target     `json:"targets"`
	Tiers   []TierPolicy `json:"tiers,omitempty"`
}

// BuildInput builds a module at a commit.
type BuildInput struct {
	Plan   string `json:"plan"`
	Module string `json:"module"`
	Commit string `json:"commit"`
}

// ComposeResult is what the plan intends for one machine.
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
	// Remove is set for a sync that stops the plan's module on the
	// machine: the declaration sent is what runs, without it.
	Remove bool `json:"remove,omitempty"`
	// Rollback is set for a rollback plan's push: the one that may take
	// the plan's module below what runs and below the floor, to Build.
	Rollback *Rollback `json:"rollback,omitempty"`
	// From, with Rollback, is the build a plan puts a machine back from
	// after its tier's analysis failed: the push applies only while the
	// machine still runs it.
	From *mesh.Build `json:"from,omitempty"`
	// Note is words the declaration carries for the host to journal: an
	// operator's override of a freeze.
	Note string `json:"note,omitempty"`
	// HandedAt is when the plan handed the request to the machine
	// workflow, by the clock of the worker that did (the plan was running
	// then). A push that starts soon after needs no word from the server
	// that its plan still runs; see activities.PlanFresh.
	HandedAt time.Time `json:"handed_at,omitzero"`
	// Local asks the machine workflow to run this push as a local
	// activity, in the workflow task that takes it: the handing worker's
	// push.local_activity, read when the plan hands the request over, so a
	// change of the setting reaches running machine workflows at their next
	// push.
	Local bool `json:"local,omitempty"`
}

// FromDigest is the digest of From, "" when the request is not a put-back.
func (r PushRequest) FromDigest() string {
	if r.From == nil {
		return ""
	}
	return r.From.Digest
}

// RequestID is the push request ID a plan uses for a machine.
func RequestID(plan, machine string) string { return plan + "@" + machine }

// PushResult answers a PushRequest.
type PushResult struct {
	Request string        `json:"request"`
	Plan    string        `json:"plan"`
	Machine string        `json:"machine"`
	Outcome MachineStatus `json:"outcome"`
	Reason  string        `json:"reason,omitempty"`
	// Seq is the declaration sequence sent (0 when nothing was sent).
	Seq     uint64   `json:"seq,omitempty"`
	Rebased []string `json:"rebased,omitempty"`
}

// CancelPush withdraws a queued request.
type CancelPush struct {
	Request string `json:"request"`
	Reason  string `json:"reason,omitempty"`
}

// HandPushesInput hands a tier's requests to their machine workflows.
type HandPushesInput struct {
	Requests []PushRequest `json:"requests"`
}

// HandPushesResult says how many were handed over.
type HandPushesResult struct {
	Enqueued int `json:"enqueued"`
}

// PushInput is one push attempt from the machine workflow: the request and
// the sequence the workflow proposes.
type PushInput struct {
	Request PushRequest `json:"request"`
	Seq     uint64      `json:"seq"`
	// Floor is the machine workflow's own record, per module, of the
	// newest container that ran healthy on the machine: the floor a host
	// that lost its state no longer knows.
	Floor map[string]mesh.Container `json:"floor,omitempty"`
}

// PushOutcome is what the push activity did. Permanent failures arrive as
// non-retryable application errors carrying a PushOutcome as details.
type PushOutcome struct {
	Outcome MachineStatus `json:"outcome"`
	Reason  string        `json:"reason,omitempty"`
	// Seq is the sequence sent; it may be above the proposed one when the
	// host reported a higher last sequence.
	Seq         uint64           `json:"seq,omitempty"`
	Sent        bool             `json:"sent"`
	Rebased     []string         `json:"rebased,omitempty"`
	Declaration mesh.Declaration `json:"declaration"`
	// HostLostState is set when the host reported a last sequence below
	// the one this machine's workflow had sent: it lost its state (a
	// replaced disk, a re-imaged machine) and was pushed from the fleet's
	// records of its floor instead.
	HostLostState string `json:"host_lost_state,omitempty"`
}

// BakeInput watches a tier's machines, healthy on the plan's build, for the
// tier's bake before the next tier starts.
type BakeInput struct {
	Plan     string        `json:"plan"`
	Tier     int           `json:"tier"`
	Machines []string      `json:"machines"`
	Build    mesh.Build    `json:"build"`
	Bake     time.Duration `json:"bake"`
}

// BakeResult says the tier stayed healthy through its bake. A machine that
// did not fails the bake with ErrUnhealthy, named in the failure.
type BakeResult struct {
	Machines int `json:"machines"`
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
	// SignalBudget, when positive, is how many signals one run takes before
	// it continues as new, in place of the default (tests); carried across
	// continue-as-new.
	SignalBudget int `json:"signal_budget,omitempty"`
	// Floor carries the workflow's floor record across continue-as-new.
	Floor map[string]mesh.Container `json:"floor,omitempty"`
	// Running carries the last declaration the workflow found running
	// healthy across continue-as-new.
	Running *mesh.Declaration `json:"running,omitempty"`
	// LocalPush runs this workflow's pushes as local activities, in the
	// workflow task that took the request, sparing the server an activity
	// task and a workflow task per push (the worker's push.local_activity
	// when the workflow started). It is carried across continue-as-new.
	// Runs since the machine workflow's "request-push-mode" change follow
	// each request's Local instead; it is still set, so that a worker of the
	// code before that change, during an upgrade, pushes as configured.
	LocalPush bool `json:"local_push,omitempty"`
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
}

// QueuedRequest is a request as the machine query shows it.
type QueuedRequest struct {
	Request    string `json:"request"`
	Plan       string `json:"plan"`
	Module     string `json:"module"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
}
