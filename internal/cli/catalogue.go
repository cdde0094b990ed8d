package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/levers"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// RebuildTimeout bounds waiting for a catalogue rebuild, which builds
// every build the hosts run, one after another. A rebuild cut short (or
// given up on here) goes on in the worker; running the command again
// joins it.
const RebuildTimeout = time.Hour

func (a *app) catalogueCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalogue",
		Short: "Repair the worker's catalogue of builds",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.catalogueRebuildCommand())
	return cmd
}

func (a *app) catalogueRebuildCommand() *cobra.Command {
	var in meshapi.RebuildInput
	cmd := &cobra.Command{
		Use:   "rebuild [--by NAME] [--reason R]",
		Short: "Rebuild a lost catalogue from what the hosts run, trusting only what verifies",
		Long: `rebuild restores the catalogue after it was lost (a deleted database, a new
worker without the old one's state). Without it every push to a machine is
refused: the machine runs a digest the catalogue does not know, so no one can
say whether a push would downgrade it.

The worker asks every host what it runs. Each build a host reports (module,
commit, digest) is built again from its commit, and recorded, with its
generation and as converged where it runs healthy, only when the rebuilt
digest is the one the hosts run. Builds are reproducible, so a digest that
does not match is something no commit makes: it is named and never recorded,
and pushes that would replace it stay refused unless forced. So are containers
whose host reports no commit, and modules the mesh config lacks.

It exits 0 when every host answered and every build verified, 3 when some did
not (each named with why), 1 when it could not run. Running it again is safe:
a build already recorded is confirmed, not doubled.`,
		Example: `  starter catalogue rebuild --reason "catalogue disk lost"
  starter catalogue rebuild --by alice --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if in.By == "" {
				in.By = operator()
			}
			in.Client = ClientIdentity()
			return a.withConfig(cmd.Context(), nil, func(ctx context.Context, cfg *config.Config, c client.Client) error {
				ctx, cancel := context.WithTimeout(ctx, RebuildTimeout)
				defer cancel()
				res, err := levers.Rebuild(ctx, c, cfg.Temporal.TaskQueue, in)
				if err != nil {
					return err
				}
				if a.json() {
					err = a.printJSON(res)
				} else {
					err = writeRebuild(a.stdout, res)
				}
				if err == nil && !res.Complete() {
					err = &IncompleteError{What: fmt.Sprintf("catalogue rebuild: %d not verified, %d hosts not asked", len(res.Unverified), len(res.Unreachable))}
				}
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Reason, "reason", "", "why, for the rebuild's record in the Web UI")
	f.StringVar(&in.By, "by", "", "who rebuilds it (default: the user running the starter)")
	return cmd
}

// writeRebuild is catalogue rebuild's report: what was verified and
// recorded, what was not and why, the hosts not asked, and a last line
// that says what it means for the next push.
func writeRebuild(w io.Writer, res meshapi.RebuildResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERIFIED\tMODULE\tCOMMIT\tGEN\tDIGEST\tMACHINES")
	for _, v := range res.Verified {
		fmt.Fprintf(tw, "yes\t%s\t%s\t%d\t%s\t%s\n", v.Claim.Module, mesh.ShortCommit(v.Claim.Commit), v.Build.Generation,
			mesh.ShortDigest(v.Claim.Digest), strings.Join(v.Claim.Machines, ","))
	}
	for _, v := range res.Unverified {
		fmt.Fprintf(tw, "NO\t%s\t%s\t-\t%s\t%s\n", v.Claim.Module, cmp.Or(mesh.ShortCommit(v.Claim.Commit), "-"),
			mesh.ShortDigest(v.Claim.Digest), strings.Join(v.Claim.Machines, ","))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	var b strings.Builder
	for _, v := range res.Unverified {
		build := v.Claim.Module
		if v.Claim.Commit != "" {
			build += " at " + mesh.ShortCommit(v.Claim.Commit)
		}
		fmt.Fprintf(&b, "not verified: %s (%s) on %s: %s\n", build, mesh.ShortDigest(v.Claim.Digest), strings.Join(v.Claim.Machines, ","), v.Reason)
	}
	for _, m := range slices.Sorted(maps.Keys(res.Unreachable)) {
		fmt.Fprintf(&b, "host of %s not asked: %s\n", m, res.Unreachable[m])
	}
	fmt.Fprintf(&b, "%d %s verified and recorded", len(res.Verified), plural(len(res.Verified), "build", "builds"))
	switch {
	case len(res.Unverified) > 0:
		fmt.Fprintf(&b, "; %d not: they are not recorded, and a push that would replace one stays refused unless forced (starter merge --force) or until a person replaces it on the host\n", len(res.Unverified))
	case len(res.Unreachable) > 0:
		b.WriteString("; run it again once the hosts not asked answer\n")
	default:
		b.WriteString(": every host answered and every build it runs verified\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
