package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/cmdrun"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// Exit codes of the starter. They are part of its interface: CI jobs and
// scripts branch on them, so a plan that ended badly (3) can be told from a
// starter that could not do its job (1) or was called wrongly (2).
// The first three are the worker's and the host agent's too (package
// cmdrun).
const (
	ExitOK = cmdrun.ExitOK
	// ExitError: the command failed (config, Temporal, plan not found, a
	// refused approve/pause/resume/abort, ...).
	ExitError = cmdrun.ExitError
	// ExitUsage: the command line was wrong (unknown command or flag,
	// missing argument, unknown module, malformed commit, bad gate) and
	// nothing was sent to Temporal.
	ExitUsage = cmdrun.ExitUsage
	// ExitPlanFailed: --wait followed the plan to an end other than
	// converged or superseded (halted, refused, aborted), or a lever ran
	// to its end without doing all it was asked (IncompleteError).
	ExitPlanFailed = 3
)

// UsageError is a command line the starter refuses before doing anything
// (its cause, such as config.ErrUnknownModule, is unwrapped): the same
// type the worker and the host agent refuse theirs with, so that ExitCode
// tells it apart (exit 2) without matching text.
type UsageError = cmdrun.UsageError

// PlanEndedError reports that --wait saw the plan end in a state other than
// converged or superseded. It carries the final state so that in-process
// callers (the integration tests) can inspect it without parsing output.
type PlanEndedError struct {
	State meshapi.PlanState
}

func (e *PlanEndedError) Error() string {
	return "plan " + e.State.Plan + " ended " + withReason(e.State.State, e.State.Reason)
}

// IncompleteError reports a lever that ran to its end but could not do
// all it was asked (a catalogue rebuild that left builds unverified or
// hosts unasked): its output says what, and it exits as a plan that ended
// badly does.
type IncompleteError struct{ What string }

func (e *IncompleteError) Error() string { return e.What }

// ExitCode maps an error returned by Execute to the process exit code, so
// that main stays a one-liner and the mapping is tested with the commands.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var pe *PlanEndedError
	var ie *IncompleteError
	if errors.As(err, &pe) || errors.As(err, &ie) {
		return ExitPlanFailed
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitError
}

// messageError replaces an error's text with one written for an operator
// while keeping the original in the chain for errors.Is/As.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

func usagef(cause error, format string, args ...any) error {
	return &UsageError{Err: &messageError{msg: fmt.Sprintf(format, args...), err: cause}}
}

// cobraUsage turns an error cobra raised before a command ran (unknown
// command or flag, wrong argument count, missing required flag) into a
// one-line UsageError pointing at the command's help.
func cobraUsage(cmd *cobra.Command, err error) error {
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	path := "starter"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	return &UsageError{Err: &messageError{msg: fmt.Sprintf("%s (see %q)", msg, path+" --help"), err: err}}
}

// notFound is the one wording for a plan ID the server does not know.
func notFound(id string, err error) error {
	return &messageError{
		msg: fmt.Sprintf("plan %s not found; check the module and commit, or list plans with \"starter plan list\"", id),
		err: err,
	}
}

// planError words the errors of reading a plan.
func planError(id string, err error) error {
	if errors.Is(err, plans.ErrNotFound) {
		return notFound(id, err)
	}
	return err
}

// rejection returns the plan's own message when it refused an update (its
// validator's ApplicationError), without the SDK's "(type: ..., retryable:
// ...)" decoration.
func rejection(err error) (error, bool) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Message() != "" {
		return &messageError{msg: app.Message(), err: err}, true
	}
	return err, false
}

func withReason(state meshapi.PlanStatus, reason string) string {
	if reason == "" {
		return string(state)
	}
	// A held plan's reason already begins with its state ("held: freeze
	// by alice: ..."); it is said once.
	if strings.HasPrefix(reason, string(state)+": ") {
		return reason
	}
	return string(state) + ": " + reason
}
