package meshapi

import (
	"fmt"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// SignalHoldLifted tells a plan that a freeze was lifted (a HoldLifted): a
// plan held by a freeze checks again at once, without polling; a plan not
// held ignores it. The starter sends it to every running plan after an
// unfreeze.
const SignalHoldLifted = "hold-lifted"

// HoldLifted is SignalHoldLifted's message: who lifted what, for the log.
type HoldLifted struct {
	By    string `json:"by,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// Workflow types of the freeze levers: short workflows on the worker, which
// owns the catalogue, as for the levers on builds.
const (
	FreezeWorkflowType   = "Freeze"
	UnfreezeWorkflowType = "Unfreeze"
	FreezesWorkflowType  = "ListFreezes"
)

// FreezeID is the ID of a freeze lever's run for a scope (module and
// machine, "" for every): verb is "freeze" or "unfreeze". Two operators
// freezing one scope at once share one run and one freeze.
func FreezeID(verb, module, machine string) string {
	return fmt.Sprintf("%s/%s@%s", verb, orAll(module), orAll(machine))
}

// FreezesID is the ID of a listing of the freezes; listings asked at once
// share one run.
const FreezesID = "freezes"

func orAll(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// FreezeInput asks that plans hold (starter freeze): of Module on Machine,
// each "" for every module or machine.
type FreezeInput struct {
	Module  string `json:"module,omitempty"`
	Machine string `json:"machine,omitempty"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// Validate is what the CLI and the workflow both refuse before anything is
// recorded: a freeze says who and why.
func (in FreezeInput) Validate() error {
	return required("a freeze", "by", in.By, "reason", in.Reason)
}

// UnfreezeInput lifts the freezes of exactly one scope (starter unfreeze).
type UnfreezeInput struct {
	Module  string `json:"module,omitempty"`
	Machine string `json:"machine,omitempty"`
	By      string `json:"by"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// UnfreezeResult is what an unfreeze lifted, and which plans were told.
type UnfreezeResult struct {
	Lifted []mesh.Freeze `json:"lifted"`
	// Signalled are the running plans told (SignalHoldLifted).
	Signalled []string `json:"signalled,omitempty"`
}

// FreezesInput asks for the active freezes (starter freeze list).
type FreezesInput struct{}

// FreezesResult is the active freezes, oldest first.
type FreezesResult struct {
	Freezes []mesh.Freeze `json:"freezes"`
}

// Override lets a merge pass freezes and deployment windows (starter merge
// --override-freeze): who and why travel in every declaration, so that each
// host journals it.
type Override struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// Words are what the declaration and the journal say of the override.
func (o Override) Words() string {
	return fmt.Sprintf("override freeze by %s: %s", Who(o.By, o.Client), o.Reason)
}

func (o Override) validate() error {
	return required("an override of a freeze", "by", o.By, "reason", o.Reason)
}

// HoldsInput asks whether a plan must hold before its next batch: is a
// freeze on its module or any of the batch's machines, or is the mesh
// outside its deployment windows?
type HoldsInput struct {
	Module   string   `json:"module"`
	Machines []string `json:"machines"`
	// Rollback plans pass freezes and windows: they are how an operator
	// undoes a bad build, whatever the calendar says.
	Rollback bool `json:"rollback,omitempty"`
	// OverrideFreeze passes freezes and windows (journalled by the hosts).
	OverrideFreeze bool `json:"override_freeze,omitempty"`
}

// HoldsResult says whether and why the plan holds; Why is empty when it
// may go on.
type HoldsResult struct {
	// Frozen are the active freezes that apply: of the whole mesh, of the
	// module, or of one of the machines.
	Frozen []mesh.Freeze `json:"frozen,omitempty"`
	// WindowOpensAt is set when the mesh is outside its deployment windows
	// (and no freeze applies): when it may go on. The plan sleeps until
	// then on a durable timer.
	WindowOpensAt *time.Time `json:"window_opens_at,omitempty"`
	// Why is the hold in the plan's words: "held: freeze by alice: release
	// week" or "held: outside window, opens at 2026-12-07T08:00:00Z".
	Why string `json:"why,omitempty"`
}
