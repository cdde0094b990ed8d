package workflows

// liveChanges are the workflow.GetVersion change IDs the workflow code asks
// today, each beside the constant its GetVersion call names. A change that alters the commands either workflow issues
// declares its ID here (TestVersionsAreDeclared holds the code to that).
var liveChanges = map[string]string{
	// Plan, since baseline 2: a plan of more than meshapi.RelayAbove
	// machines hears its answers through relays.
	"answer-relays": "relayChange",
	// Plan: a tier with group_by is pushed and budgeted by group.
	"group-budgets": "groupsChange",
	// Machine: rollbacks and put-backs go before the merge pushes queued,
	// are never superseded by a newer build, and their push activity
	// carries meshapi.RollbackPriority.
	"rollbacks-first": "rollbacksFirstChange",
	// Plan: a plan of a module with notify targets hands its events to
	// them.
	"notifications": "notifyChange",
	// Machine: a request that carries push.max_unavailable is pushed
	// only with a lease of the fleet budget (workflow FleetBudget).
	"fleet-budget": "fleetBudgetChange",
	// Machine: the workflow keeps its meshapi.MachineSummary in its memo
	// for the overviews.
	"machine-summary": "summaryChange",
	// Machine: each summary it publishes also sets
	// meshapi.SAMachineChanged, the time a reader lists changes since.
	"machine-changed-at": "changedAtChange",
	// Notifier: it tells its plan when a target starts failing, is given
	// up on, or recovers (meshapi.SignalNotifyTrouble).
	"notify-trouble": "notifyTroubleChange",
	// Machine: a machine workflow whose machine left the mesh config
	// ends once its queue is empty (meshapi.Retire).
	"machine-retire": "retireChange",
}

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
}

// The baselines: the days the replay set was recorded afresh from the code
// of that day, with every gate before it retired. No fleet ran meshroll in
// production before either.
const (
	baseline1 = "baseline 1, 2026-12-03"
	baseline2 = "baseline 2, 2026-12-04"
)
