package meshapi

import (
	"fmt"

	"github.com/meshroll/meshroll/internal/mesh"
)

const rollbackPrefix = "rollback/"

// RollbackID is the ID of a module's rollback plan: one per module at a
// time, so that a second rollback asked while one runs finds it instead of
// racing it. A later rollback of the module reuses the ID (a new run).
func RollbackID(module string) string { return rollbackPrefix + module }

// Rollback makes a plan a rollback: instead of building a merge it puts
// every machine running the module above a healthy earlier build back on
// it, tier by tier with the tiers' policies and health checks. It is the
// one downgrade below a host's floor meshroll sanctions: each declaration
// carries who asked and why, and the host journals it as a rollback.
type Rollback struct {
	// To is the commit to roll back to, in full or a unique prefix of at
	// least seven characters; empty is the newest build below what runs
	// that ran healthy somewhere and is not rejected.
	To     string `json:"to,omitempty"`
	By     string `json:"by"`
	Reason string `json:"reason"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// RollbackPriority is the Temporal task priority key of a rollback plan
// (its workflow and, inherited, its activities) and of the machine
// workflow's push of a rollback or put-back: 1, the most urgent; everything
// else runs at the server's default, 3. It orders tasks only where a task
// queue is backed up, and only on a server whose matcher honours priority
// (matching.useNewMatcher, see deploy/README.md).
const RollbackPriority = 1

// Words are what the declaration and the journal say of the rollback.
func (r Rollback) Words() string {
	return fmt.Sprintf("rollback by %s: %s", Who(r.By, r.Client), r.Reason)
}

// Who is how a lever's asker is recorded and shown: who they said they are
// (--by) and, when known, the Temporal client identity their request came
// with, "alice (client alice@ops-1 pid 4242)". Both are the starter's own
// word; see deploy/README.md for what makes them trustworthy.
func Who(by, client string) string {
	if client == "" || client == by {
		return by
	}
	return fmt.Sprintf("%s (client %s)", by, client)
}

func (r Rollback) validate() error {
	return required("a rollback", "by", r.By, "reason", r.Reason)
}

const syncPrefix = "sync/"

// SyncID is the ID of the plan that syncs one module on one machine: one at
// a time per machine and module; a later sync is a new run.
func SyncID(machine, module string) string { return syncPrefix + machine + "/" + module }

// Sync makes a plan a sync of one machine: instead of building a merge it
// brings the module on Machine to the newest build that ran healthy
// somewhere and is not rejected, through the machine workflow, the guard
// and the health checks like any push (starter machine sync). It never
// takes a machine down: one already on something newer is left as it runs.
type Sync struct {
	Machine string `json:"machine"`
	By      string `json:"by"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
	// Remove stops the module on Machine instead: the config does not give
	// the machine the module, and its host runs it (drift: unexpected).
	Remove bool `json:"remove,omitempty"`
}

// SyncTargetInput asks which build a sync brings a module to.
type SyncTargetInput struct {
	Module  string `json:"module"`
	Machine string `json:"machine"`
	// Remove asks for the build the machine runs, which the sync stops.
	Remove bool `json:"remove,omitempty"`
}

// RollbackTargetInput asks which build a rollback plan puts back and on
// which machines, and has the builds it rolls back from rejected.
type RollbackTargetInput struct {
	Plan     string   `json:"plan"`
	Module   string   `json:"module"`
	Rollback Rollback `json:"rollback"`
	// Machines are the plan's targets: the machines that run the module.
	Machines []string `json:"machines"`
	// From, when set, is the one build rolled back: only machines that
	// run it are put back, onto the newest healthy build below it. A plan
	// putting back a tier whose analysis failed sets it, so that a machine
	// a newer build reached since is left as it runs.
	From *mesh.Build `json:"from,omitempty"`
}

// RollbackTargetResult is the rollback's target and reach.
type RollbackTargetResult struct {
	Build mesh.Build `json:"build"`
	// Machines are those of the targets whose host reports the module
	// above the target (or could not be asked: the push decides there).
	Machines []string `json:"machines"`
	// From are the builds rolled back from, now rejected so that no stale
	// plan or queued push sends them again.
	From []mesh.Build `json:"from,omitempty"`
}
