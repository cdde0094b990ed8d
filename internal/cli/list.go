package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/plans"
)

// DefaultListLimit is how many plans "plan list" shows unless --limit says
// otherwise: the recent ones an operator looks for, not a whole history.
const DefaultListLimit = 20

func (a *app) listCommand() *cobra.Command {
	var f plans.ListFilter
	var sel string
	cmd := &cobra.Command{
		Use:   "list [--module M] [--commit C] [--machine NAME] [--selector S] [--state S] [--limit N]",
		Short: "List plans, newest first, by module, commit, machine or state",
		Long: `list shows the plans of this mesh (its task queue), newest first, from
Temporal's visibility store. Every filter given must match:

  --module   the merged module
  --commit   the merge commit (full id)
  --machine  a machine the plan pushes
  --selector a machine the plan pushes, among those whose labels the
             selector matches (by the labels in the mesh config now)
  --state    the plan's state, one of
             ` + plans.StateNames() + `

The filters use meshroll's search attributes (MeshrollModule, MeshrollCommit,
MeshrollMachines, MeshrollState), which the worker registers on the namespace
when it starts. STATE falls back to the workflow's status (running,
completed, ...) for a plan that carries no MeshrollState.

The visibility store lags a plan by a moment: a plan started a second ago
may not be listed yet, and a state may be a step behind "starter plan show".`,
		Example: `  starter plan list
  starter plan list --module host --state halted
  starter plan list --machine edge-1 --limit 5 --output json`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, _ []string) error {
		if f.Limit < 1 {
			return usagef(nil, "--limit %d: want at least 1", f.Limit)
		}
		// Checked before the config is read or Temporal dialled: a filter
		// that cannot match is the command line's fault.
		if err := f.Validate(); err != nil {
			return &UsageError{Err: err}
		}
		// The selector picks machines by the labels the mesh config gives
		// them, before Temporal is dialled.
		pick := func(cfg *config.Config, path string) error {
			var err error
			_, f.AnyMachine, err = selectMachines(cfg, path, sel)
			return err
		}
		return a.withConfig(cmd.Context(), pick, func(ctx context.Context, cfg *config.Config, c client.Client) error {
			f.TaskQueue = cfg.Temporal.TaskQueue
			list, err := plans.List(ctx, c, cfg.Temporal.Namespace, f)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(list)
			}
			return writePlanList(a.stdout, list)
		})
	})
	fl := cmd.Flags()
	fl.StringVar(&f.Module, "module", "", "only plans of this module")
	fl.StringVar(&f.Commit, "commit", "", "only plans of this merge commit (full id)")
	fl.StringVar(&f.Machine, "machine", "", "only plans that push this machine")
	fl.StringVar(&sel, "selector", "", "only plans that push a machine whose labels match this label selector, such as \"ring=canary\"")
	fl.StringVar((*string)(&f.State), "state", "", "only plans in this state ("+plans.StateNames()+")")
	fl.IntVar(&f.Limit, "limit", DefaultListLimit, "at most this many plans")
	return cmd
}

// writePlanList is plan list's table.
func writePlanList(w io.Writer, list []plans.Summary) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no plans match")
		if err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tMODULE\tCOMMIT\tSTATE\tSTARTED\tCLOSED")
	for _, p := range list {
		started, closed := "-", "-"
		if !p.Started.IsZero() {
			started = p.Started.Local().Format(timeLayout)
		}
		if p.Closed != nil {
			closed = p.Closed.Local().Format(timeLayout)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Plan, dash(p.Module), dash(mesh.ShortCommit(p.Commit)), dash(p.State), started, closed)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// short cuts s to n bytes; commits and digests are ASCII.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
