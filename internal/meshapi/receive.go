package meshapi

import (
	"errors"
	"fmt"

	"github.com/meshroll/meshroll/internal/mesh"
)

// The merge receiver (package webhook) takes push events from the git host
// and starts one Receive workflow per delivery; the workflow's one
// activity fetches the modules' clone, finds which modules the push
// touched and starts their plans. The HTTP handler does nothing else, so a
// fetch that fails is retried by Temporal, not lost with the request.
const (
	// ReceiveWorkflowType is the Receive workflow's registered type.
	ReceiveWorkflowType = "Receive"
	receivePrefix       = "receive/"
)

// ReceiveID is the Receive workflow's ID for a delivery: the provider and
// the git host's delivery ID (or a digest of the body when it sends none),
// so that a re-delivered event finds the workflow the first delivery
// started.
func ReceiveID(provider, delivery string) string {
	return receivePrefix + provider + "/" + delivery
}

// ReceiveInput is one push to a branch that modules deploy, as the
// receiver read it from the event.
type ReceiveInput struct {
	// Provider is the git host's kind: github, gitlab or gitea.
	Provider string `json:"provider"`
	// Delivery is the delivery's ID, as in ReceiveID.
	Delivery string `json:"delivery"`
	// Repository is the repository as the event names it, for messages.
	Repository string `json:"repository"`
	// Branch is the pushed branch (refs/heads/ taken off).
	Branch string `json:"branch"`
	// Before is the branch's head before the push; "" when the event has
	// none (a new branch), and then every module counts as touched.
	Before string `json:"before,omitempty"`
	// After is the pushed head: the commit the plans start at.
	After string `json:"after"`
	// Modules are the modules that deploy Repository's Branch, by the
	// receiver's mesh config; the activity keeps those whose paths the
	// push touched.
	Modules []string `json:"modules"`
}

// Validate refuses an input that can never start a plan.
func (in ReceiveInput) Validate() error {
	if err := required("a received push", "provider", in.Provider, "delivery", in.Delivery, "branch", in.Branch); err != nil {
		return err
	}
	if len(in.Modules) == 0 {
		return errors.New("a received push needs modules")
	}
	if err := mesh.ValidCommit(in.After); err != nil {
		return fmt.Errorf("pushed head: %w", err)
	}
	if in.Before != "" {
		if err := mesh.ValidCommit(in.Before); err != nil {
			return fmt.Errorf("head before the push: %w", err)
		}
	}
	return nil
}

// ReceiveResult says what a delivery started.
type ReceiveResult struct {
	// Plans are the plans of the modules the push touched, one each, at
	// After: started by this delivery, or found already started by a
	// manual merge or an earlier delivery (Existing).
	Plans []ReceivedPlan `json:"plans"`
	// Untouched are the modules the push did not touch: no plan.
	Untouched []string `json:"untouched,omitempty"`
	// Everything is true when the push could not be compared with what
	// came before (a new branch, or a head before the push that the clone
	// lacks), so every module counted as touched.
	Everything bool `json:"everything,omitempty"`
}

// ReceivedPlan is one plan a delivery maps to.
type ReceivedPlan struct {
	Module   string `json:"module"`
	Plan     string `json:"plan"`
	Existing bool   `json:"existing,omitempty"`
}
