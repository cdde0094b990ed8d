package meshapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FleetBudgetWorkflowType is the fleet's one budget of unavailable machines
// across every plan (workflows.FleetBudget): machine workflows lease a
// place in it before they push, when push.max_unavailable is configured.
const FleetBudgetWorkflowType = "FleetBudget"

// Messages of the fleet budget. All three are signals, not updates: a
// fleet of hundreds of machines waiting for a place must never meet the
// server's limit of updates in flight per workflow, and a lease asked for
// by signal is answered by signal, so a machine workflow waits on its own
// channel, not on a blocked handler that would hold the budget's
// continue-as-new.
const (
	// SignalLeaseAsk carries a LeaseAsk from a machine workflow (through
	// the AskLease local activity's signal-with-start) to the budget.
	SignalLeaseAsk = "lease-ask"
	// SignalLeaseRelease carries a LeaseRelease from a machine workflow
	// whose push ended (healthy, failed or put back) to the budget.
	SignalLeaseRelease = "lease-release"
	// SignalLeaseGrant carries a LeaseGrant from the budget to a machine
	// workflow: its place, or the words of why it waits.
	SignalLeaseGrant = "lease-grant"
)

// FleetBudgetID is the fleet budget's workflow ID for the mesh whose
// workers poll taskQueue: one per mesh, so every plan, batch and rollback
// of the fleet counts against the same one, and two meshes sharing a
// namespace (each on its own task queue) do not share a budget.
func FleetBudgetID(taskQueue string) string { return "fleet-budget/" + taskQueue }

// FleetBudget is push.max_unavailable as a push request carries it: how
// many machines of the fleet may be unavailable (a push in flight to them,
// until it is healthy, failed or put back) at once, across every plan.
// A request without one (nil) is pushed without asking.
type FleetBudget struct {
	// MaxUnavailable is the count, or the percentage when Percent.
	MaxUnavailable int  `json:"max_unavailable"`
	Percent        bool `json:"percent,omitempty"`
	// FleetSize is how many machines the handing worker's config names: a
	// percentage is of it, as it was when the place is granted.
	FleetSize int `json:"fleet_size,omitempty"`
}

// Limit is how many machines may hold a lease at once: the count, or the
// percentage of the fleet rounded down, and never below 1 (a budget that
// let no machine be pushed would stop the fleet for ever).
func (b FleetBudget) Limit() int {
	n := b.MaxUnavailable
	if b.Percent {
		n = b.FleetSize * b.MaxUnavailable / 100
	}
	return max(n, 1)
}

// String is the budget as the config writes it.
func (b FleetBudget) String() string {
	if b.Percent {
		return strconv.Itoa(b.MaxUnavailable) + "% of " + strconv.Itoa(b.FleetSize) + " machines"
	}
	return strconv.Itoa(b.MaxUnavailable)
}

// LeaseAsk asks the fleet budget for a place for one machine's push. A
// machine holds at most one lease (one writer per machine), so leases are
// keyed by machine: asking again, as a retried activity or a restarted
// machine workflow does, is answered with the lease it holds.
type LeaseAsk struct {
	Machine string `json:"machine"`
	// Request, Plan and Module say which push the place is for, for the
	// words of those that wait behind it.
	Request string `json:"request"`
	Plan    string `json:"plan"`
	Module  string `json:"module"`
	// Urgent marks a rollback's push or a put-back: served before the
	// merge pushes waiting, as the machine queue serves it.
	Urgent bool `json:"urgent,omitempty"`
	// Budget is the asking worker's push.max_unavailable: the newest ask's
	// is the one the budget holds to.
	Budget FleetBudget `json:"budget"`
	// Hold is the longest the push may take, retries and all; the lease
	// lapses after it if it is never released (a machine workflow
	// terminated mid-push), so a lost release cannot stop the fleet for
	// ever.
	Hold time.Duration `json:"hold"`
}

// LeaseRelease gives a machine's place back. Request, when set, must be
// the lease's: a late release of an earlier push frees nothing.
type LeaseRelease struct {
	Machine string `json:"machine"`
	Request string `json:"request,omitempty"`
}

// LeaseGrant answers a LeaseAsk: Granted, or the words of why it waits
// ("waiting for the fleet budget: 1 of 1 unavailable (edge-3 pushing
// host)"), sent once when it starts to wait.
type LeaseGrant struct {
	Request string `json:"request"`
	Granted bool   `json:"granted"`
	Words   string `json:"words,omitempty"`
}

// Lease is a place granted.
type Lease struct {
	LeaseAsk
	GrantedAt time.Time `json:"granted_at"`
	// Until is when the lease lapses unless released first.
	Until time.Time `json:"until"`
}

// FleetBudgetInput starts (or continues) the fleet budget, carrying its
// leases and its waiting line across continue-as-new.
type FleetBudgetInput struct {
	Budget  FleetBudget `json:"budget"`
	Leases  []Lease     `json:"leases,omitempty"`
	Waiting []LeaseAsk  `json:"waiting,omitempty"`
	// SignalBudget, when positive, is how many signals one run takes
	// before it continues as new, in place of the default (tests).
	SignalBudget int `json:"signal_budget,omitempty"`
}

// FleetBudgetState answers the fleet budget's state query.
type FleetBudgetState struct {
	Budget  FleetBudget `json:"budget"`
	Limit   int         `json:"limit"`
	Leases  []Lease     `json:"leases"`
	Waiting []LeaseAsk  `json:"waiting"`
}

// BudgetWaitWords says why a machine waits for the fleet budget: the
// leases held of limit, and how many asks are ahead of it in line. The
// budget sends them with each refusal, and a reader makes them again from
// the budget's state (WaitWords), so that both say the same.
func BudgetWaitWords(leases []Lease, limit, ahead int) string {
	held := make([]string, 0, len(leases))
	for _, l := range leases {
		held = append(held, fmt.Sprintf("%s pushing %s", l.Machine, l.Module))
	}
	w := fmt.Sprintf("waiting for the fleet budget: %d of %d unavailable", len(leases), limit)
	if len(held) > 0 {
		w += " (" + strings.Join(held, ", ") + ")"
	}
	if ahead > 0 {
		w += fmt.Sprintf(", %d ahead in line", ahead)
	}
	return w
}

// WaitWords are BudgetWaitWords for the ask of request as the budget
// stands; ok is false when request is not waiting (granted, or unknown).
func (s FleetBudgetState) WaitWords(request string) (words string, ok bool) {
	for i, a := range s.Waiting {
		if a.Request == request {
			return BudgetWaitWords(s.Leases, s.Limit, i), true
		}
	}
	return "", false
}
