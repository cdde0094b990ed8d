package meshapi

import "strings"

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
	// SignalRetire carries a Retire from the worker to the machine workflow
	// of a machine that left the mesh config: it ends once its queue is
	// empty.
	SignalRetire = "retire"
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
	// QuerySummary answers a plan's PlanState.Summarised: its large tiers
	// as counts, what following a plan polls.
	QuerySummary = "summary"
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

// RequestID is the push request ID a plan uses for a machine.
func RequestID(plan, machine string) string { return plan + "@" + machine }

// PutBackID is the request ID of the push that puts a machine back after
// its tier's analysis failed: unlike RequestID, so that the machine
// workflow does not take it for a repeat of the plan's push.
func PutBackID(plan, machine string) string { return RequestID(plan, machine) + "#put-back" }
