package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/levers"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

func (a *app) freezeCommand() *cobra.Command {
	var in meshapi.FreezeInput
	cmd := &cobra.Command{
		Use:   "freeze --reason R [--module M] [--machine X] [--by NAME]",
		Short: "Hold roll-outs: plans in scope wait before their next tier or batch until unfrozen",
		Long: `freeze records a freeze in the catalogue. Every plan of the module (--module),
or pushing the machine (--machine), or, with neither, every plan, holds before its
next tier or batch: a push in flight finishes, nothing more is sent. "starter plan
show" says "held: freeze by <who>: <reason>". The plan goes on by itself when the
freeze is lifted (starter unfreeze with the same --module and --machine).

Rollback plans pass freezes; a merge passes with --override-freeze --reason
(journalled by every host it touches).

--by defaults to the user running the starter. "starter freeze list" lists the
active freezes.`,
		Example: `  starter freeze --reason "release week"
  starter freeze --module host --reason "incident 42: hold host roll-outs" --by alice
  starter freeze --machine control-node --reason "disk swap" --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if in.By == "" {
				in.By = operator()
			}
			in.Client = ClientIdentity()
			if err := in.Validate(); err != nil {
				return &UsageError{Err: err}
			}
			return a.leverCall(cmd.Context(), in.Module, in.Machine, func(ctx context.Context, cfg *config.Config, c client.Client) error {
				f, err := levers.Freeze(ctx, c, cfg.Temporal.TaskQueue, in)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(f)
				}
				return a.printf("froze %s (freeze %d, %s)\nplans in scope hold before their next tier or batch; lift it with: starter unfreeze%s\n",
					f.Scope(), f.ID, f, scopeFlags(f.Module, f.Machine))
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Module, "module", "", "freeze only plans of this module (default: every module)")
	f.StringVar(&in.Machine, "machine", "", "freeze only plans pushing this machine (default: every machine)")
	f.StringVar(&in.Reason, "reason", "", "why, shown by every plan it holds (required)")
	f.StringVar(&in.By, "by", "", "who freezes (default: the user running the starter)")
	cmd.AddCommand(a.freezeListCommand())
	return cmd
}

func (a *app) unfreezeCommand() *cobra.Command {
	var in meshapi.UnfreezeInput
	cmd := &cobra.Command{
		Use:   "unfreeze [--module M] [--machine X] [--by NAME]",
		Short: "Lift the freezes of one scope; plans they held go on by themselves",
		Long: `unfreeze lifts every active freeze whose scope is exactly --module and
--machine (neither: the freezes of the whole mesh; a freeze of the whole mesh is
not lifted by unfreezing one module). Lifted freezes are kept in the catalogue,
with who lifted them and when.

It then tells every running plan to check again (the hold-lifted signal), so a
plan no other freeze or window holds goes on at once. Running it again, even
with nothing left to lift, tells them again.`,
		Example: `  starter unfreeze
  starter unfreeze --module host --by alice --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if in.By == "" {
				in.By = operator()
			}
			in.Client = ClientIdentity()
			return a.leverCall(cmd.Context(), in.Module, in.Machine, func(ctx context.Context, cfg *config.Config, c client.Client) error {
				res, err := levers.Unfreeze(ctx, c, cfg.Temporal.Namespace, cfg.Temporal.TaskQueue, in)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(res)
				}
				scope := mesh.Freeze{Module: in.Module, Machine: in.Machine}.Scope()
				if len(res.Lifted) == 0 {
					if err := a.printf("no active freeze of %s to lift (starter freeze list shows them)\n", scope); err != nil {
						return err
					}
				}
				for _, f := range res.Lifted {
					if err := a.printf("lifted freeze %d of %s (%s)\n", f.ID, scope, f); err != nil {
						return err
					}
				}
				return a.printf("told %d running %s to check again\n", len(res.Signalled), plural(len(res.Signalled), "plan", "plans"))
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Module, "module", "", "lift the freezes of this module (default: of every module)")
	f.StringVar(&in.Machine, "machine", "", "lift the freezes of this machine (default: of every machine)")
	f.StringVar(&in.By, "by", "", "who unfreezes (default: the user running the starter)")
	return cmd
}

func (a *app) freezeListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the active freezes, oldest first",
		Args:  cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			return a.leverCall(cmd.Context(), "", "", func(ctx context.Context, cfg *config.Config, c client.Client) error {
				res, err := levers.Freezes(ctx, c, cfg.Temporal.TaskQueue)
				if err != nil {
					return err
				}
				if res.Freezes == nil {
					res.Freezes = []mesh.Freeze{}
				}
				if a.json() {
					return a.printJSON(res)
				}
				return writeFreezes(a.stdout, res.Freezes)
			})
		}),
	}
}

// writeFreezes is freeze list's table.
func writeFreezes(w io.Writer, fs []mesh.Freeze) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCOPE\tBY\tSINCE\tREASON")
	for _, f := range fs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", f.ID, f.Scope(), f.By, f.At.UTC().Format("2006-01-02 15:04 MST"), f.Reason)
	}
	if len(fs) == 0 {
		fmt.Fprintln(tw, "(no active freezes)")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// scopeFlags are the flags naming a scope, for a hint to type.
func scopeFlags(module, machine string) string {
	s := ""
	if module != "" {
		s += " --module " + module
	}
	if machine != "" {
		s += " --machine " + machine
	}
	return s
}

// plural is one or many, by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
