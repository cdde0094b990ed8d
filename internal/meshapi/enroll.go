package meshapi

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
)

// A machine that enrolls (package enroll) has one Enrollment workflow,
// started by the worker's enrollment endpoint when its agent first asks,
// and running for as long as the machine is known: it is the record of the
// machine's ask and of the operator's decision (who admitted or turned it
// away, when, why), the Web UI's place to see it, and what the worker
// lists to know which machines are admitted.
const (
	// EnrollmentWorkflowType is the Enrollment workflow's registered type.
	EnrollmentWorkflowType = "Enrollment"
	enrollmentPrefix       = "enroll/"

	// SignalEnrollAsk carries an EnrollAsk from the enrollment endpoint:
	// an agent asked with a host or labels the workflow does not have yet.
	SignalEnrollAsk = "ask"
	// UpdateEnrollApprove admits the machine (starter machine approve),
	// with an EnrollDecision; it answers the Enrollment after it.
	UpdateEnrollApprove = "approve"
	// UpdateEnrollDeny turns the machine away (starter machine deny), or
	// takes an admitted machine out of the mesh again.
	UpdateEnrollDeny = "deny"
)

// States of an Enrollment: the values of its search attribute
// SAEnrollment, the same words as package enroll's answers.
const (
	EnrollPending  = "pending"
	EnrollAdmitted = "admitted"
	EnrollDenied   = "denied"
)

// ErrEnrollDecided: an approve or deny reached an enrollment already in
// that state; nothing changed.
const ErrEnrollDecided = "EnrollmentDecided"

// SAEnrollment is an Enrollment workflow's state, kept current, so that
// the worker lists the admitted machines and the starter the pending ones.
var SAEnrollment = temporal.NewSearchAttributeKeyKeyword("MeshrollEnrollment")

// MemoEnrollment is the memo key under which an Enrollment workflow keeps
// its Enrollment, so that a listing carries each machine's host and
// labels without a query per machine.
const MemoEnrollment = "enrollment"

// EnrollmentID is the ID of machine's Enrollment workflow: one per
// machine name, so that an agent asking again finds its own.
func EnrollmentID(machine string) string { return enrollmentPrefix + machine }

// EnrollAsk is an agent's ask, as the enrollment endpoint took it.
type EnrollAsk struct {
	Machine string            `json:"machine"`
	Host    string            `json:"host"`
	Labels  map[string]string `json:"labels,omitempty"`
	// At is when the endpoint took it.
	At time.Time `json:"at"`
}

// Validate refuses an ask that cannot be recorded.
func (a EnrollAsk) Validate() error {
	return required("an enrollment ask", "machine", a.Machine, "host", a.Host)
}

// EnrollDecision is an operator's approve or deny.
type EnrollDecision struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// Validate refuses a decision that does not say who made it.
func (d EnrollDecision) Validate() error {
	if d.By == "" {
		return errors.New("an enrollment decision needs by")
	}
	return nil
}

// Enrollment is a machine's enrollment as it stands: its Enrollment
// workflow's input, query answer and memo.
type Enrollment struct {
	// Ask is the machine's latest ask taken: while pending, a new host or
	// new labels replace it; once decided, they no longer do.
	Ask EnrollAsk `json:"ask"`
	// State is EnrollPending, EnrollAdmitted or EnrollDenied.
	State string `json:"state"`
	// Decided is the latest decision, nil while none was made.
	Decided *EnrollDecision `json:"decided,omitempty"`
	// DecidedAt is when it was made.
	DecidedAt time.Time `json:"decided_at,omitzero"`
}
