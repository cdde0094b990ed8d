package workflows

// liveChanges are the workflow.GetVersion change IDs the workflow code asks
// today, each beside the constant its GetVersion call names. A change that
// alters the commands a workflow issues declares its ID here
// (TestVersionsAreDeclared holds the code to that).
var liveChanges = map[string]string{
	changePlanRehand:     "changePlanRehand",
	changePlanHandApart:  "changePlanHandApart",
	changePlanHandWindow: "changePlanHandWindow",
}

// changePlanRehand: a tier that hears no answer for a while hands its
// unanswered pushes again (see plan.awaitAnswers). It adds a timer to
// every hand-over's wait.
const changePlanRehand = "plan-rehand"

// changePlanHandApart: a hand-over of more than one part schedules each
// part's activity in a coroutine of its own. The SDK's deadlock detector
// times each step of a coroutine (from when it wakes until it blocks), not
// the workflow task, and fails the task when a step passes a second.
// Scheduling an activity encodes (and compresses) its input in the
// coroutine that schedules it, and one coroutine scheduling every part of
// a tier grew its step with the tier: about a second at 100,000 machines
// on an idle box, and past it at 600 under the race detector on a loaded
// one. It adds a marker to such a plan's history.
const changePlanHandApart = "plan-hand-apart"

// changePlanHandWindow: a hand-over of more than push.hand_window
// requests hands that many at once and the others as answers make room
// (see plan.hand), where it handed every request at once. It schedules
// more, smaller hand-over activities, later, and adds a marker to such a
// plan's history.
const changePlanHandWindow = "plan-hand-window"

// Retired is a change ID whose GetVersion branch is gone: its new path is
// the only code, and the histories recorded before it were dropped from the
// replay set. An ID is never used again: an old history still carries its
// marker.
type Retired struct {
	// ID is the change ID, Workflow the workflow type that asked it.
	ID, Workflow string
	// Baseline is the replay set its path went into, and when.
	Baseline string
}

// retiredChanges are every change ID retired so far, by baseline.
var retiredChanges = []Retired{
	{ID: "search-attributes", Workflow: "Plan", Baseline: baseline1},
	{ID: "batches", Workflow: "Plan", Baseline: baseline1},
	{ID: "push-answers", Workflow: "Machine", Baseline: baseline1},
	{ID: "tier-policies", Workflow: "Plan", Baseline: baseline2},
	{ID: "holds", Workflow: "Plan", Baseline: baseline2},
	{ID: "failed-endings", Workflow: "Plan", Baseline: baseline2},
	{ID: "build-compose", Workflow: "Plan", Baseline: baseline2},
	{ID: "analysis", Workflow: "Plan", Baseline: baseline2},
	{ID: "hand-activities", Workflow: "Plan", Baseline: baseline2},
	{ID: "request-push-mode", Workflow: "Machine", Baseline: baseline2},
	{ID: "signal-budget", Workflow: "Machine", Baseline: baseline2},
	{ID: "answer-relays", Workflow: "Plan", Baseline: baseline3},
	{ID: "group-budgets", Workflow: "Plan", Baseline: baseline3},
	{ID: "notifications", Workflow: "Plan", Baseline: baseline3},
	{ID: "notify-trouble", Workflow: "Notifier", Baseline: baseline3},
	{ID: "rollbacks-first", Workflow: "Machine", Baseline: baseline3},
	{ID: "fleet-budget", Workflow: "Machine", Baseline: baseline3},
	{ID: "machine-summary", Workflow: "Machine", Baseline: baseline3},
	{ID: "machine-changed-at", Workflow: "Machine", Baseline: baseline3},
	{ID: "machine-retire", Workflow: "Machine", Baseline: baseline3},
}

// The baselines: the days the replay set was recorded afresh from the code
// of that day, with every gate before it retired. No fleet ran meshroll in
// production before any of them. Baseline 3 also sets a machine's change
// time at most once per meshapi.MachineChangedEvery: with the two gates a
// machine workflow's first run asked at its first push, that took a
// machine's first push from 19 history events to 14.
const (
	baseline1 = "baseline 1, 2026-12-03"
	baseline2 = "baseline 2, 2026-12-04"
	baseline3 = "baseline 3, 2026-12-06"
)
