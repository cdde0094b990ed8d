package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Freeze records an operator's freeze (starter freeze). It pushes nothing
// and stops nothing in flight: plans it applies to hold before their next
// batch. Its execution, listed in the Web UI under FreezeID, is an audit
// record beside the catalogue's: who, what and why.
func Freeze(ctx workflow.Context, in meshapi.FreezeInput) (mesh.Freeze, error) {
	return lever[mesh.Freeze](ctx, "freeze "+mesh.Freeze{Module: in.Module, Machine: in.Machine}.Scope(), acts.Freeze, in)
}

// Unfreeze lifts the freezes of exactly one scope (starter unfreeze); the
// starter then tells the running plans, which check again.
func Unfreeze(ctx workflow.Context, in meshapi.UnfreezeInput) (meshapi.UnfreezeResult, error) {
	return lever[meshapi.UnfreezeResult](ctx, "unfreeze "+mesh.Freeze{Module: in.Module, Machine: in.Machine}.Scope(), acts.Unfreeze, in)
}

// ListFreezes answers the active freezes (starter freeze list): the
// catalogue is the worker's to ask.
func ListFreezes(ctx workflow.Context, in meshapi.FreezesInput) (meshapi.FreezesResult, error) {
	return lever[meshapi.FreezesResult](ctx, "list freezes", acts.ListFreezes, in)
}
