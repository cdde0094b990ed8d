package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// errorReason is the most useful message of an activity failure: the retry
// budget running out says so, with the last failure's message.
func errorReason(err error) string {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if cause := errors.Unwrap(timeout); cause != nil {
			return "gave up after the retry budget: " + errorReason(cause)
		}
		return "gave up after the retry budget: " + timeout.Message()
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

// plural is one or many, by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tally names the tier's machines that failed and those that refused (or
// were withdrawn), each with its reason.
func tally(tier *meshapi.TierState) (failed, refused []string) {
	for _, m := range tier.Machines {
		switch m.State {
		case meshapi.MachineFailed:
			failed = append(failed, fmt.Sprintf("%s: %s", m.Machine, m.Reason))
		case meshapi.MachineRefused, meshapi.MachineCancelled:
			refused = append(refused, fmt.Sprintf("%s: %s", m.Machine, m.Reason))
		}
	}
	return failed, refused
}

// haltReason says why a tier halted, in the words the plan ends with. A
// tier pushed at once with no budget keeps the words plans always had.
func haltReason(tier *meshapi.TierState, policy meshapi.TierPolicy, batchesLeft bool, problems []string) string {
	if tier.Batches == 0 && policy.MaxFailed == 0 {
		return fmt.Sprintf("tier %d halted, later tiers untouched: %s", tier.Tier, someOf(problems))
	}
	return fmt.Sprintf("tier %d halted: %d of its %d machines failed, more than the %d it may lose; %s: %s",
		tier.Tier, tier.Failed, len(tier.Machines), policy.MaxFailed, untouchedWords(tier, batchesLeft), someOf(problems))
}

// untouchedWords says what a halted tier leaves unpushed: later tiers, and
// its own machines not yet pushed when it had batches left.
func untouchedWords(tier *meshapi.TierState, batchesLeft bool) string {
	if !batchesLeft {
		return "later tiers untouched"
	}
	waiting := 0
	for _, m := range tier.Machines {
		if m.State == meshapi.MachineWaiting {
			waiting++
		}
	}
	return fmt.Sprintf("its %d %s not yet pushed and later tiers untouched", waiting, plural(waiting, "machine", "machines"))
}

// namedInReason is how many machines' problems a plan's reason names; the
// rest it counts.
const namedInReason = 5

// someOf joins the first namedInReason machines' problems and counts the
// rest. A batch of a hundred machines that fail one way must not end a
// plan with a hundred clauses in one line: the person on call reads the
// first few, and plan show lists every machine with its own reason.
func someOf(problems []string) string {
	if len(problems) <= namedInReason {
		return strings.Join(problems, "; ")
	}
	rest := len(problems) - namedInReason
	return fmt.Sprintf("%s; and %d more %s (plan show lists each with its reason)",
		strings.Join(problems[:namedInReason], "; "), rest, plural(rest, "machine", "machines"))
}
