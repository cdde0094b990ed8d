package cli

import (
	"github.com/spf13/cobra"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/meshapi"
)

func (a *app) rollbackCommand() *cobra.Command {
	var o mergeOpts
	var r meshapi.Rollback
	cmd := &cobra.Command{
		Use:   "rollback --module M [--to COMMIT] --reason R [--by NAME] [--gate TIER ...] [--wait]",
		Short: "Roll a module back to an earlier healthy build, tier by tier, rejecting the builds it leaves",
		Long: `rollback starts a rollback plan (ID rollback/<module>): it puts every machine
running the module above the target back on the target, tier by tier with the
tiers' policies and health checks, like a merge.

The target is --to (a commit, in full or a unique prefix of 7 or more
characters), or by default the newest build below what runs that ran healthy
somewhere and is not rejected. A target that is unknown, rejected, or not below
what runs is refused and nothing is sent.

The builds it rolls back from are rejected first (by the rollback plan, with
your reason), so no stale plan or queued push sends them again. Going below a
host's floor is the one sanctioned downgrade: each declaration carries your name
and reason, the host journals it as a rollback, and its floor follows. A later
merge of a newer commit rolls forward as usual.

One rollback of a module runs at a time; asking again while it runs finds it.
--by defaults to the user running the starter. --wait follows the plan to its
end; the exit code is 0 when it converged and 3 when it halted or was refused.`,
		Example: `  starter rollback --module host --reason "crash loop after an hour" --wait
  starter rollback --module host --to 0123abc --reason "CVE-2026-1234 in g7" --by alice --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if r.By == "" {
				r.By = operator()
			}
			r.Client = ClientIdentity()
			if r.To != "" {
				if _, _, err := catalogue.CommitPrefix(r.To); err != nil {
					return usagef(err, "--to %q: %v", r.To, err)
				}
			}
			o.rollback = &r
			return a.merge(cmd.Context(), o)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.module, "module", "", "module to roll back (required)")
	f.StringVar(&r.To, "to", "", "commit to roll back to (default: the newest healthy, not rejected build below what runs)")
	f.StringVar(&r.Reason, "reason", "", "why, journalled by every host it touches (required)")
	f.StringVar(&r.By, "by", "", "who rolls back (default: the user running the starter)")
	f.IntSliceVar(&o.gates, "gate", nil, "push tier that waits for approval; repeat or comma-separate for several")
	f.BoolVar(&o.wait, "wait", false, "follow the plan to its end and exit 3 unless it converged")
	_ = cmd.MarkFlagRequired("module")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}
