package meshapi

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// Error types of a plan that ends as a failed workflow. A plan that ends
// halted, refused or aborted did not do what its merge asked, so its
// workflow fails: the Web UI's list then shows it red and failed, not the
// green "Completed" of a converged plan, and Temporal's own metrics count
// it. The failure's message is the plan's reason and its details are the
// final PlanState, which PlanOutcome reads back.
const (
	ErrorPlanHalted  = "PlanHalted"
	ErrorPlanRefused = "PlanRefused"
	ErrorPlanAborted = "PlanAborted"
)

// Fails reports whether a plan that ends in s ends as a failed workflow.
// Converged and superseded plans complete: a superseded plan's machines
// are taken over by a newer build of its module, which is the mesh working.
func (s PlanStatus) Fails() bool {
	return planErrorType(s) != ""
}

func planErrorType(s PlanStatus) string {
	switch s {
	case PlanHalted:
		return ErrorPlanHalted
	case PlanRefused:
		return ErrorPlanRefused
	case PlanAborted:
		return ErrorPlanAborted
	}
	return ""
}

// PlanFailure is the error a plan workflow ends with when its final state
// fails (see Fails): non-retryable, of a stable type per state, carrying
// the state for whoever reads the result.
func PlanFailure(st PlanState) error {
	return temporal.NewNonRetryableApplicationError(st.Reason, planErrorType(st.State), nil, st)
}

// PlanOutcome reads the final state of a plan from how its workflow ended:
// err is what getting the workflow's result returned, and st the value it
// decoded. A plan that failed with PlanFailure's error has its state taken
// from the failure's details and gives nil; any other error is returned
// as it is (the workflow was terminated, timed out, or the call failed).
func PlanOutcome(err error, st *PlanState) error {
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.HasDetails() {
		return err
	}
	switch appErr.Type() {
	case ErrorPlanHalted, ErrorPlanRefused, ErrorPlanAborted:
		var failed PlanState
		if appErr.Details(&failed) == nil && failed.State.Fails() {
			*st = failed
			return nil
		}
	}
	return err
}
