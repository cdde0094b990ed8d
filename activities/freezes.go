package activities

import (
	"context"
	"fmt"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Freeze records an operator's freeze in the catalogue, where every
// worker's hold check finds it. An unknown module or machine is permanent.
func (a *Activities) Freeze(ctx context.Context, in meshapi.FreezeInput) (mesh.Freeze, error) {
	if err := a.knownScope(in.Module, in.Machine); err != nil {
		return mesh.Freeze{}, err
	}
	f, err := a.Catalogue.Freeze(ctx, in.Module, in.Machine, meshapi.Who(in.By, in.Client), in.Reason)
	if err != nil {
		return mesh.Freeze{}, fmt.Errorf("record freeze: %w", err)
	}
	a.Log.Warn().Int64("freeze", f.ID).Str("module", f.Module).Str("machine", f.Machine).
		Str("by", f.By).Str("reason", f.Reason).Msg("frozen")
	return f, nil
}

// Unfreeze lifts the freezes of exactly the input's scope. Telling held
// plans is the caller's (levers.Unfreeze), after this answers.
func (a *Activities) Unfreeze(ctx context.Context, in meshapi.UnfreezeInput) (meshapi.UnfreezeResult, error) {
	if err := a.knownScope(in.Module, in.Machine); err != nil {
		return meshapi.UnfreezeResult{}, err
	}
	lifted, err := a.Catalogue.Unfreeze(ctx, in.Module, in.Machine, meshapi.Who(in.By, in.Client))
	if err != nil {
		return meshapi.UnfreezeResult{}, fmt.Errorf("unfreeze: %w", err)
	}
	for _, f := range lifted {
		a.Log.Warn().Int64("freeze", f.ID).Str("module", f.Module).Str("machine", f.Machine).
			Str("by", in.By).Msg("freeze lifted")
	}
	return meshapi.UnfreezeResult{Lifted: append([]mesh.Freeze{}, lifted...)}, nil
}

// ListFreezes answers the active freezes.
func (a *Activities) ListFreezes(ctx context.Context, _ meshapi.FreezesInput) (meshapi.FreezesResult, error) {
	fs, err := a.Catalogue.Freezes(ctx)
	if err != nil {
		return meshapi.FreezesResult{}, fmt.Errorf("list freezes: %w", err)
	}
	return meshapi.FreezesResult{Freezes: append([]mesh.Freeze{}, fs...)}, nil
}

// knownScope refuses, for good, a module or machine the worker's mesh
// config lacks ("" is every one).
func (a *Activities) knownScope(module, machine string) error {
	if module != "" {
		if err := a.knownModule(module); err != nil {
			return err
		}
	}
	if machine != "" {
		if _, err := a.knownMachine(machine); err != nil {
			return err
		}
	}
	return nil
}
