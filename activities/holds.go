package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// Holds answers whether a plan must hold before its next batch, and why: a
// freeze in the catalogue on its module, on one of the batch's machines or
// on the whole mesh; or the mesh outside its deployment windows, with when
// they open. It is a local activity of the plan, run before every batch, so
// that a freeze taken while a plan waits between tiers holds it, and the
// time the windows open is computed here, on the worker's clock, not in
// workflow code. Rollback plans pass freezes and windows, as does a plan
// whose operator overrode them.
func (a *Activities) Holds(ctx context.Context, in meshapi.HoldsInput) (meshapi.HoldsResult, error) {
	var res meshapi.HoldsResult
	if in.Rollback || in.OverrideFreeze {
		return res, nil
	}
	fs, err := a.Catalogue.Freezes(ctx)
	if err != nil {
		return res, fmt.Errorf("read freezes: %w", err)
	}
	for _, f := range fs {
		if f.Holds(in.Module, in.Machines) {
			res.Frozen = append(res.Frozen, f)
		}
	}
	if len(res.Frozen) > 0 {
		res.Why = "held: " + res.Frozen[0].String()
		if n := len(res.Frozen) - 1; n > 0 {
			res.Why += fmt.Sprintf(" (and %d more %s)", n, plural(n, "freeze", "freezes"))
		}
		return res, nil
	}
	windows := a.Windows
	if windows == nil && a.Mesh != nil {
		windows = a.Mesh.Current().DeployWindows()
	}
	if len(windows) == 0 {
		return res, nil
	}
	now := time.Now()
	if a.Clock != nil {
		now = a.Clock()
	}
	ok, deny := windows.Allowed(now)
	if ok {
		return res, nil
	}
	opens, err := windows.OpensAt(now)
	if err != nil {
		// Not retried: the config must change, and the plan says so.
		return res, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrInvalidInput, err)
	}
	opens = opens.UTC()
	res.WindowOpensAt = &opens
	res.Why = "held: outside window, opens at " + opens.Format(time.RFC3339)
	if deny != nil && deny.Reason != "" {
		res.Why += " (deny window: " + deny.Reason + ")"
	}
	return res, nil
}

// plural is one or many, by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
