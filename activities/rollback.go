package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// RollbackTarget resolves a rollback plan's target build and the machines
// it puts back: those whose host reports the module above the target (or
// cannot be asked: their push decides at send time). It rejects the builds
// it rolls back from first, so that from then on no stale plan or queued
// push sends them again, whatever becomes of the rollback.
//
// The target is the commit asked for, or else the newest build below the
// newest that runs that ran healthy somewhere and is not rejected (and is
// not the same bits as what runs). A target that is unknown, rejected, or
// not below what runs is refused for good, naming it.
func (a *Activities) RollbackTarget(ctx context.Context, in meshapi.RollbackTargetInput) (meshapi.RollbackTargetResult, error) {
	if err := a.knownModule(in.Module); err != nil {
		return meshapi.RollbackTargetResult{}, err
	}
	runs, unknown := a.runningGenerations(ctx, in.Module, in.Machines)
	var current mesh.Build
	for _, b := range runs {
		if b.Generation > current.Generation {
			current = b
		}
	}
	if in.From != nil {
		current = *in.From
		maps.DeleteFunc(runs, func(_ string, b mesh.Build) bool { return b.Digest != in.From.Digest })
	}
	if current.Generation == 0 {
		return meshapi.RollbackTargetResult{}, permanent(meshapi.ErrInvalidInput,
			"no machine reports running a build of %s the catalogue knows: nothing to roll back from", in.Module)
	}
	target, err := a.rollbackBuild(ctx, in, current)
	if none := (nothingBelow{}); errors.As(err, &none) {
		if in.From == nil {
			return meshapi.RollbackTargetResult{}, permanent(meshapi.ErrUnknownBuild, "%v; name one with --to", err)
		}
		// A put-back with nothing below to go back to: the build failed
		// its analysis all the same. It is rejected, as a put-back's build
		// always is, so that no composition gives it to a machine that
		// lacks the module; the machines that run it keep it.
		r, rerr := a.Catalogue.Reject(ctx, in.From.Module, in.From.Commit, in.Plan, in.Rollback.Words()+"; nothing below it to put its machines back on")
		if rerr != nil {
			return meshapi.RollbackTargetResult{}, fmt.Errorf("reject %s generation %d, which failed: %w", in.From.Module, in.From.Generation, rerr)
		}
		a.announceOwnRejection(ctx, r, in.Plan)
		return meshapi.RollbackTargetResult{}, permanent(meshapi.ErrUnknownBuild,
			"%v; generation %d is rejected and its machines keep it: starter rollback --module %s --to COMMIT puts them on a build you name, or merge a fix",
			err, current.Generation, in.Module)
	}
	if err != nil {
		return meshapi.RollbackTargetResult{}, err
	}

	res := meshapi.RollbackTargetResult{Build: target, Machines: unknown}
	from := map[string]mesh.Build{}
	for m, b := range runs {
		if b.Generation > target.Generation && b.Digest != target.Digest {
			res.Machines = append(res.Machines, m)
			from[b.Digest] = b
		}
	}
	slices.Sort(res.Machines)
	why := fmt.Sprintf("rolled back to generation %d (%s) by %s: %s", target.Generation, mesh.ShortCommit(target.Commit), in.Rollback.By, in.Rollback.Reason)
	for _, b := range from {
		r, err := a.Catalogue.Reject(ctx, b.Module, b.Commit, in.Plan, why)
		if err != nil {
			return meshapi.RollbackTargetResult{}, fmt.Errorf("reject %s generation %d, rolled back from: %w", b.Module, b.Generation, err)
		}
		a.announceOwnRejection(ctx, r, in.Plan)
		res.From = append(res.From, b)
	}
	slices.SortFunc(res.From, func(x, y mesh.Build) int { return int(y.Generation - x.Generation) })
	a.Log.Warn().Str("plan", in.Plan).Str("module", in.Module).Int64("to", target.Generation).
		Strs("machines", res.Machines).Str("by", in.Rollback.By).Str("reason", in.Rollback.Reason).Msg("rolling back")
	return res, nil
}

// nothingBelow is a rollback with no build below to go to; the caller
// words what to do, which differs for an operator's rollback and a plan's
// put-back.
type nothingBelow struct {
	module     string
	generation int64
}

func (e nothingBelow) Error() string {
	return fmt.Sprintf("no build of %s below generation %d ran healthy anywhere and is not rejected", e.module, e.generation)
}

// rollbackBuild is the build a rollback puts back, below current.
func (a *Activities) rollbackBuild(ctx context.Context, in meshapi.RollbackTargetInput, current mesh.Build) (mesh.Build, error) {
	if in.Rollback.To == "" {
		below := current.Generation
		for {
			b, ok, err := a.Catalogue.NewestHealthyBelow(ctx, in.Module, below)
			if err != nil {
				return mesh.Build{}, fmt.Errorf("find a build of %s to roll back to: %w", in.Module, err)
			}
			if !ok {
				return mesh.Build{}, nothingBelow{module: in.Module, generation: current.Generation}
			}
			if b.Digest != current.Digest { // the same bits built again are no way back
				return b, nil
			}
			below = b.Generation
		}
	}
	if _, _, err := catalogue.CommitPrefix(in.Rollback.To); err != nil {
		return mesh.Build{}, permanent(meshapi.ErrInvalidInput, "rollback target %q of %s: %v", in.Rollback.To, in.Module, err)
	}
	b, ok, err := a.Catalogue.Build(ctx, in.Module, in.Rollback.To)
	switch {
	case errors.Is(err, catalogue.ErrAmbiguousCommit):
		return mesh.Build{}, permanent(meshapi.ErrInvalidInput, "%v", err)
	case err != nil:
		return mesh.Build{}, fmt.Errorf("find build of %s at %s: %w", in.Module, in.Rollback.To, err)
	case !ok:
		return mesh.Build{}, permanent(meshapi.ErrUnknownBuild, "no build of %s at commit %s in the catalogue (starter build list --module %s shows them)",
			in.Module, in.Rollback.To, in.Module)
	case b.Generation >= current.Generation:
		return mesh.Build{}, permanent(meshapi.ErrInvalidInput, "rollback target %s generation %d (%s) is not below generation %d, the newest that runs; a rollback only goes back",
			in.Module, b.Generation, mesh.ShortCommit(b.Commit), current.Generation)
	}
	if r, rejected, err := a.Catalogue.Rejected(ctx, b.Digest); err != nil {
		return mesh.Build{}, fmt.Errorf("is %s generation %d rejected: %w", in.Module, b.Generation, err)
	} else if rejected {
		return mesh.Build{}, permanent(meshapi.ErrRejected, "rollback target %s generation %d (%s) was %s; choose another with --to",
			in.Module, b.Generation, mesh.ShortCommit(b.Commit), r)
	}
	return b, nil
}

// runningGenerations asks the machines' hosts at once what build of module
// each runs, as the catalogue knows it (a host's own generation is not
// trusted). unknown are the machines that could not be asked or run a
// digest the catalogue does not know.
func (a *Activities) runningGenerations(ctx context.Context, module string, machines []string) (runs map[string]mesh.Build, unknown []string) {
	runs = map[string]mesh.Build{}
	for m, ans := range a.runningOnAll(ctx, module, machines) {
		if ans.err == nil && ans.rc == nil {
			continue // runs no such module
		}
		b, known, err := mesh.Build{}, false, ans.err
		if err == nil {
			b, known, err = a.Catalogue.Lookup(ctx, ans.rc.Digest)
		}
		if err != nil || !known {
			unknown = append(unknown, m)
			continue
		}
		runs[m] = b
	}
	return runs, unknown
}

// removeTarget is the build a removing sync stops: what the machine's host
// reports running of the module, as the catalogue knows it.
func (a *Activities) removeTarget(ctx context.Context, in meshapi.SyncTargetInput) (mesh.Build, error) {
	rc, err := a.runningOn(ctx, in.Machine, in.Module)
	if err != nil {
		return mesh.Build{}, fmt.Errorf("ask %s what it runs: %w", in.Machine, err)
	}
	if rc == nil {
		return mesh.Build{}, permanent(meshapi.ErrInvalidInput, "machine %s does not run %s: nothing to stop", in.Machine, in.Module)
	}
	b, known, err := a.Catalogue.Lookup(ctx, rc.Digest)
	switch {
	case err != nil:
		return mesh.Build{}, fmt.Errorf("look up %s %s: %w", in.Module, rc.Digest, err)
	case !known:
		return mesh.Build{}, permanent(meshapi.ErrUnknownDigest, "machine %s runs %s at digest %s, which the catalogue does not know; stop it on the host by hand",
			in.Machine, in.Module, rc.Digest)
	}
	return b, nil
}

// permanent is a non-retryable application error of type typ.
func permanent(typ, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return temporal.NewNonRetryableApplicationError(msg, typ, errors.New(msg))
}

// SyncTarget is the build a sync brings a module on a machine to: the
// newest that ran healthy somewhere and is not rejected. A module the
// machine should not run, or one with no such build, is refused for good.
func (a *Activities) SyncTarget(ctx context.Context, in meshapi.SyncTargetInput) (mesh.Build, error) {
	if err := a.knownModule(in.Module); err != nil {
		return mesh.Build{}, err
	}
	m, err := a.knownMachine(in.Machine)
	if err != nil {
		return mesh.Build{}, err
	}
	if in.Remove {
		return a.removeTarget(ctx, in)
	}
	if !slices.Contains(m.Modules, in.Module) {
		return mesh.Build{}, permanent(meshapi.ErrInvalidInput, "machine %s does not run %s by the worker's mesh config (it runs %v)", in.Machine, in.Module, m.Modules)
	}
	b, ok, err := a.Catalogue.NewestConverged(ctx, in.Module)
	switch {
	case err != nil:
		return mesh.Build{}, fmt.Errorf("newest healthy build of %s: %w", in.Module, err)
	case !ok:
		return mesh.Build{}, permanent(meshapi.ErrUnknownBuild, "no build of %s ran healthy anywhere and is not rejected: merge one first", in.Module)
	}
	return b, nil
}
