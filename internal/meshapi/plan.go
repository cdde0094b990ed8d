package meshapi

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

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
	// NotifyTrouble is, per notify target in trouble, its Notifier's
	// last word: failing or abandoned (a target that recovers leaves).
	NotifyTrouble []NotifyTrouble `json:"notify_trouble,omitempty"`
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
	// Window is the push.hand_window the tier's batch is handed over in
	// when it is larger (the others wait their turn), else 0.
	Window int `json:"window,omitempty"`
	// Failed counts the tier's machines that failed (within its budget,
	// or the one that halted it).
	Failed int `json:"failed,omitempty"`
	// BakeUntil is when the tier's bake ends, while it bakes.
	BakeUntil *time.Time `json:"bake_until,omitempty"`
	// Analysis is each analysis check the tier waits on, with its
	// measurements so far, once its machines are healthy.
	Analysis []AnalysisCheck `json:"analysis,omitempty"`
	// Summary, in a plan's summary (PlanState.Summarised), stands for a
	// large tier's machines, of which Machines then holds only the first
	// few to look at. Nil in a plan's state.
	Summary *TierSummary `json:"summary,omitempty"`
}

// Notes is what the tier's policy adds to a line about it, for the Web
// UI's details and the CLI alike: " (batch 2 of 3, 1 failed of 1 allowed,
// until 14:05:00 UTC)", or "" when there is nothing to add.
func (t TierState) Notes() string {
	var notes []string
	if t.Batches > 0 && t.State == TierPushing {
		notes = append(notes, fmt.Sprintf("batch %d of %d", t.Batch, t.Batches))
	}
	if t.Window > 0 && t.State == TierPushing {
		notes = append(notes, fmt.Sprintf("handed over %d at a time", t.Window))
	}
	switch {
	case t.Policy != nil && len(t.Policy.Groups) > 0:
		notes = append(notes, t.GroupNotes()...)
	case t.Failed > 0 && t.Policy != nil:
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

// WaitsItsTurn begins the reason of a machine whose push waits for room
// in its plan's hand-over window (push.hand_window): still to be handed
// to its machine workflow, though its state reads pushing.
const WaitsItsTurn = "waits its turn"

// WaitingTurn says the machine's push waits for room in its plan's
// hand-over window, so that a reader does not take it for one being sent.
func (m MachineProgress) WaitingTurn() bool {
	return m.State == MachinePushing && strings.HasPrefix(m.Reason, WaitsItsTurn)
}

// WaitingTurnWord is how the CLI and the fleet page show a push that waits
// for room in its plan's hand-over window (WaitingTurn).
const WaitingTurnWord = "waiting-turn"

// StateWord is the machine's state as people read it: its State, but
// WaitingTurnWord for a push not yet handed to its machine workflow, so
// that a tier of thousands handed over a window at a time does not read
// as thousands being sent at once.
func (m MachineProgress) StateWord() string {
	if m.WaitingTurn() {
		return WaitingTurnWord
	}
	return string(m.State)
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
	// Group is the machine's failure domain in a tier with group_by.
	Group string `json:"group,omitempty"`
}

// ApproveInput opens a gate.
type ApproveInput struct {
	// Tier to approve, ahead of time or now; nil means the gate the plan is
	// waiting at now.
	Tier *int   `json:"tier,omitempty"`
	By   string `json:"by,omitempty"`
	// Client is the Temporal client identity the starter dialled with
	// (user@host, pid): recorded beside By. Neither is checked by meshroll;
	// see deploy/README.md for making the identity trustworthy.
	Client string `json:"client,omitempty"`
}

// PauseInput holds a plan before its next tier.
type PauseInput struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// ResumeInput lets a paused plan go on.
type ResumeInput struct {
	By string `json:"by,omitempty"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// AbortInput ends a plan: queued pushes leave their machines' queues, later
// tiers are untouched.
type AbortInput struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
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
	// Group is the machine's failure domain in its tier ("site=fra1"),
	// when the tier has group_by: read from its labels when the plan
	// starts, so that the plan keeps it.
	Group string `json:"group,omitempty"`
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
	// GroupBy is the tier's group_by: the labels its failure domains are
	// told apart by. With it, Groups hold the batch size and failure
	// budget of each group, and MaxParallel and MaxFailed are not used.
	GroupBy []string      `json:"group_by,omitempty"`
	Groups  []GroupBudget `json:"groups,omitempty"`
}

// GroupBudget is one failure domain of a tier, its budgets resolved for
// the machines of the group that the plan pushes (a percentage is of the
// group): at most MaxParallel of them pushed at once, and one failure more
// than MaxFailed halts the tier.
type GroupBudget struct {
	// Group is the group's label values, "site=fra1".
	Group       string `json:"group"`
	Machines    int    `json:"machines"`
	MaxParallel int    `json:"max_parallel"`
	MaxFailed   int    `json:"max_failed,omitempty"`
}
