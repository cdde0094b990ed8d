package meshapi

import (
	"time"

	"go.temporal.io/sdk/temporal"
)

// Search attributes meshroll sets, so that the Web UI and `starter plan
// list` find plans by module, commit, machine and state, and machine
// workflows by machine. They must be registered on the namespace before a
// plan starts (the worker registers them at start-up; on the dev server
// `--search-attribute Name=Type` does too).
var (
	// SAModule is the plan's module.
	SAModule = temporal.NewSearchAttributeKeyKeyword("MeshrollModule")
	// SACommit is the plan's merge commit.
	SACommit = temporal.NewSearchAttributeKeyKeyword("MeshrollCommit")
	// SAMachines lists the machines a plan pushes (from the mesh config at
	// start).
	SAMachines = temporal.NewSearchAttributeKeyKeywordList("MeshrollMachines")
	// SAState is the plan's state (PlanState.State), kept current.
	SAState = temporal.NewSearchAttributeKeyKeyword("MeshrollState")
	// SAMachine is a machine workflow's machine.
	SAMachine = temporal.NewSearchAttributeKeyKeyword("MeshrollMachine")
	// SAMachineChanged is when a machine workflow last published its
	// MachineSummary (workflow time), so that a reader that keeps every
	// summary (package machinefeed) lists only the workflows changed since
	// its last look instead of every machine. It is set at most once per
	// MachineChangedEvery: a summary published since keeps the time
	// before, at most that much older than it.
	SAMachineChanged = temporal.NewSearchAttributeKeyTime("MeshrollMachineChanged")
)

// MachineChangedEvery is how often at most a machine workflow sets
// SAMachineChanged: a push shorter than this costs one upsert of it (at its
// start) instead of two, at every machine a plan pushes. A reader listing
// changes since its last look must reach back further than this plus the
// store's lag (machinefeed.DefaultOverlap).
const MachineChangedEvery = 10 * time.Second

// SearchAttributeTypes is every meshroll search attribute with its type
// name as the Temporal CLI's --search-attribute flag takes it.
var SearchAttributeTypes = map[string]string{
	SAModule.GetName():         "Keyword",
	SACommit.GetName():         "Keyword",
	SAMachines.GetName():       "KeywordList",
	SAState.GetName():          "Keyword",
	SAMachine.GetName():        "Keyword",
	SAMachineChanged.GetName(): "Datetime",
	SAEnrollment.GetName():     "Keyword",
}
