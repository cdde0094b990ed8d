package meshapi

import (
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

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

// PushRequest asks a machine workflow to push a declaration.
type PushRequest struct {
	// Request is unique per plan and machine; duplicates are ignored.
	Request string `json:"request"`
	// Plan is the plan workflow's ID; the answer is signalled there,
	// unless ReplyTo names the plan's relay.
	Plan string `json:"plan"`
	// ReplyTo is the workflow the answer is signalled to when it is not
	// the plan: a relay, for a plan too large to hear every machine itself
	// (see RelayAbove).
	ReplyTo     string           `json:"reply_to,omitempty"`
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
	// Budget is the handing worker's push.max_unavailable, nil when it has
	// none: with one, the machine workflow leases a place in the fleet
	// budget (FleetBudgetWorkflowType) before it sends, and gives it back
	// when the push ends.
	Budget *FleetBudget `json:"budget,omitempty"`
	// Bundles says that where the answer goes (the plan, or its relay)
	// takes it in a bundle (SignalPushResults), so that a worker sends the
	// answers of its pushes to one place many to a signal (see
	// AnswerBundle). Set by the handing worker, whose build also runs the
	// plan and its relays: a request from a build before bundles, still
	// running under Worker Versioning, is answered alone.
	Bundles bool `json:"bundles,omitempty"`
}

// FromDigest is the digest of From, "" when the request is not a put-back.
func (r PushRequest) FromDigest() string {
	if r.From == nil {
		return ""
	}
	return r.From.Digest
}

// PushResult answers a PushRequest.
type PushResult struct {
	Request string `json:"request"`
	Plan    string `json:"plan"`
	// ReplyTo is the request's: the relay the answer goes to, if any.
	ReplyTo string        `json:"reply_to,omitempty"`
	Machine string        `json:"machine"`
	Outcome MachineStatus `json:"outcome"`
	Reason  string        `json:"reason,omitempty"`
	// Seq is the declaration sequence sent (0 when nothing was sent).
	Seq     uint64   `json:"seq,omitempty"`
	Rebased []string `json:"rebased,omitempty"`
	// Bundle is the request's Bundles, for the worker that answers: the
	// answer may travel with others. It is not sent.
	Bundle bool `json:"-"`
}

// AnswerTo is the workflow ID the answer is signalled to: the request's
// relay, or else its plan.
func (r PushResult) AnswerTo() string {
	if r.ReplyTo != "" {
		return r.ReplyTo
	}
	return r.Plan
}

// ResultOf is the answer to r, saying outcome and why.
func ResultOf(r PushRequest, outcome MachineStatus, reason string) PushResult {
	return PushResult{Request: r.Request, Plan: r.Plan, ReplyTo: r.ReplyTo, Machine: r.Machine, Outcome: outcome, Reason: reason, Bundle: r.Bundles}
}

// CancelPush withdraws a queued request.
type CancelPush struct {
	Request string `json:"request"`
	Reason  string `json:"reason,omitempty"`
}

// Retire tells a machine workflow its machine has left the mesh config: it
// serves what it has queued (each push, finding the machine gone, is
// skipped and sends nothing) and then ends, rather than wait for requests
// that no plan will send. A machine added back is served by a new run.
type Retire struct {
	Reason string `json:"reason"`
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
	// Left says the push found its machine gone from the mesh config and
	// was skipped: the machine workflow retires (see Retire), as it does
	// when the worker tells it.
	Left bool `json:"left,omitempty"`
}
