package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/levers"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// LeverTimeout bounds waiting for a lever's workflow. It runs on the
// worker; with no worker polling (or one too old to know the lever) the
// command fails after this rather than hang.
const LeverTimeout = 2 * time.Minute

func (a *app) buildCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "build",
		Short: "List a module's builds, or reject one so that it is never sent again",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.buildListCommand(), a.buildRejectCommand())
	return cmd
}

func (a *app) buildListCommand() *cobra.Command {
	var in meshapi.BuildsInput
	cmd := &cobra.Command{
		Use:   "list --module M [--limit N]",
		Short: "List a module's builds, newest first, with where each runs and whether it is rejected",
		Long: `list shows every build of a module the catalogue knows, newest first: its
generation, commit, digest and when it was built; RUNS, the machines whose host
reports it now, of those that run the module; HEALTHY, how many of them report it
healthy; EVER, how many machines ever ran it healthy; and REJECTED, by whom and
why, for a build that is never sent again.

The worker answers (it owns the catalogue and the hosts' credentials); a host
it cannot reach is named below the table, its machines missing from RUNS.`,
		Example: `  starter build list --module host
  starter build list --module host --limit 5 --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if in.Limit < 0 {
				return usagef(nil, "--limit %d is negative; want 0 (all) or more", in.Limit)
			}
			return a.leverCall(cmd.Context(), in.Module, "", func(ctx context.Context, cfg *config.Config, c client.Client) error {
				res, err := levers.Builds(ctx, c, cfg.Temporal.TaskQueue, in)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(res)
				}
				targets, err := cfg.Targets(in.Module)
				if err != nil {
					return err
				}
				return writeBuildList(a.stdout, res, len(targets))
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Module, "module", "", "module whose builds to list (required)")
	f.IntVar(&in.Limit, "limit", 0, "list only the newest N builds (0: all)")
	_ = cmd.MarkFlagRequired("module")
	return cmd
}

// writeBuildList is build list's table; machines is how many machines run
// the module.
func writeBuildList(w io.Writer, res meshapi.BuildsResult, machines int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GEN\tCOMMIT\tDIGEST\tBUILT\tRUNS\tHEALTHY\tEVER\tREJECTED")
	for _, b := range res.Builds {
		rejected := "-"
		if b.Rejected != nil {
			rejected = fmt.Sprintf("by %s: %s", b.Rejected.By, b.Rejected.Reason)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\n", b.Build.Generation, mesh.ShortCommit(b.Build.Commit),
			mesh.ShortDigest(b.Build.Digest), b.BuiltAt.UTC().Format("2006-01-02 15:04 MST"),
			len(b.Running), machines, len(b.Healthy), len(b.Converged), rejected)
	}
	if len(res.Builds) == 0 {
		fmt.Fprintf(tw, "(no builds of %s yet: a merge builds one)\n", res.Module)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	for _, m := range slices.Sorted(maps.Keys(res.Unreachable)) {
		if _, err := fmt.Fprintf(w, "host of %s not asked: %s\n", m, res.Unreachable[m]); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return nil
}

func (a *app) buildRejectCommand() *cobra.Command {
	var in meshapi.RejectInput
	cmd := &cobra.Command{
		Use:   "reject --module M --commit C --reason R [--by NAME]",
		Short: "Reject a build: it is never sent again, by any plan; what runs it keeps running",
		Long: `reject records in the catalogue that a build must never be sent again. From
then on every push refuses it at send time (queued ones and plans already
running included: their next batch is refused and the plan ends refused), and a
composition never picks it for a machine that lacks the module.

It pushes nothing: machines running the build keep running it, and keep their
floors, until a newer merge or a rollback replaces it. Rejecting a build already
rejected keeps the first rejection and prints it.

--commit takes the full commit or a unique prefix of at least 7 characters.
--by defaults to the user running the starter.`,
		Example: `  starter build reject --module host --commit 0123456 --reason "crashes under load after an hour"
  starter build reject --module host --commit $SHA --reason "CVE-2026-1234" --by alice --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if in.By == "" {
				in.By = operator()
			}
			in.Client = ClientIdentity()
			if err := in.Validate(); err != nil {
				return &UsageError{Err: err}
			}
			if _, _, err := catalogue.CommitPrefix(in.Commit); err != nil {
				return usagef(err, "--commit %q: %v", in.Commit, err)
			}
			return a.leverCall(cmd.Context(), in.Module, "", func(ctx context.Context, cfg *config.Config, c client.Client) error {
				r, err := levers.Reject(ctx, c, cfg.Temporal.TaskQueue, in)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(r)
				}
				return a.printf("%s generation at %s (%s) %s\nit is never sent again; machines running it keep it until a newer merge or a rollback\n",
					r.Module, mesh.ShortCommit(r.Commit), mesh.ShortDigest(r.Digest), r)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Module, "module", "", "module of the build (required)")
	f.StringVar(&in.Commit, "commit", "", "commit of the build, or a unique prefix of 7 or more characters (required)")
	f.StringVar(&in.Reason, "reason", "", "why, for the person who finds it rejected (required)")
	f.StringVar(&in.By, "by", "", "who rejects it (default: the user running the starter)")
	_ = cmd.MarkFlagRequired("module")
	_ = cmd.MarkFlagRequired("commit")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

// leverCall checks a lever's module and machine ("" for none) against the
// config before connecting (an unknown one is a usage error), then runs fn
// with the config and a client, bounded by LeverTimeout.
func (a *app) leverCall(ctx context.Context, module, machine string, fn func(context.Context, *config.Config, client.Client) error) error {
	check := func(cfg *config.Config, path string) error { return knownScope(cfg, path, module, machine) }
	return a.withConfig(ctx, check, func(ctx context.Context, cfg *config.Config, c client.Client) error {
		ctx, cancel := context.WithTimeout(ctx, LeverTimeout)
		defer cancel()
		return fn(ctx, cfg, c)
	})
}

// knownScope checks a module and a machine ("" for none) that narrow a
// command against the config: naming one the mesh lacks is a usage error,
// the module's said first.
func knownScope(cfg *config.Config, path, module, machine string) error {
	if module != "" {
		if _, err := moduleTargets(cfg, path, module); err != nil {
			return err
		}
	}
	if machine != "" {
		return knownMachine(cfg, path, machine)
	}
	return nil
}
