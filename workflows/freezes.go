package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Freeze records an operator's freeze (starter freeze). It pushes nothing
// and stops nothing in flight: plans it applies to hold before their next
// batch. Its execution, listed in the Web UI under FreezeID, is an audit
// record beside the catalogue's: who, what and why.
func Freeze(ctx workflow.Context, in meshapi.FreezeInput) (mesh.Freeze, error) {
	if err := in.Validate(); err != nil {
		return mesh.Freeze{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrInvalidInput, err)
	}
	ctx = leverOptions(ctx, "freeze "+mesh.Freeze{Module: in.Module, Machine: in.Machine}.Scope())
	var f mesh.Freeze
	err := workflow.ExecuteActivity(ctx, acts.Freeze, in).Get(ctx, &f)
	return f, err
}

// Unfreeze lifts the freezes of exactly one scope (starter unfreeze); the
// starter then tells the running plans, which check again.
func Unfreeze(ctx workflow.Context, in meshapi.UnfreezeInput) (meshapi.UnfreezeResult, error) {
	ctx = leverOptions(ctx, "unfreeze "+mesh.Freeze{Module: in.Module, Machine: in.Machine}.Scope())
	var res meshapi.UnfreezeResult
	err := workflow.ExecuteActivity(ctx, acts.Unfreeze, in).Get(ctx, &res)
	return res, err
}

// ListFreezes answers the active freezes (starter freeze list): the
// catalogue is the worker's to ask.
func ListFreezes(ctx workflow.Context, in meshapi.FreezesInput) (meshapi.FreezesResult, error) {
	ctx = leverOptions(ctx, "list freezes")
	var res meshapi.FreezesResult
	err := workflow.ExecuteActivity(ctx, acts.ListFreezes, in).Get(ctx, &res)
	return res, err
}
