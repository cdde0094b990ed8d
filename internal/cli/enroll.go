package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// machineDecideCommand is approve or deny: update is the Enrollment's
// update, verb the command's name.
func (a *app) machineDecideCommand(verb, update string) *cobra.Command {
	var d meshapi.EnrollDecision
	short := "Admit a machine whose agent asked to enroll: the worker adds it and brings it to the newest healthy builds"
	long := `approve admits a pending machine (one whose agent, started with --enroll, asked
to join): the worker puts it in the mesh config in force beside the machines
mesh.yaml names, running enroll.modules on the tier its labels select (or the
last tier before the control plane's), and starts a sync of each of its modules,
so that it runs the newest healthy builds without anyone merging. A machine
turned away before can be admitted too. Nothing is pushed to a machine until it
is admitted.

The machine must fit the config as it stands: a tier's group_by label it lacks
is refused here, naming the label. --by defaults to the user running the
starter; who and when are kept in the machine's Enrollment workflow
(enroll/<name>), which the Web UI lists.`
	if update == meshapi.UpdateEnrollDeny {
		short = "Turn away a machine that asked to enroll, or take an admitted one out of the mesh"
		long = `deny turns a pending machine away: it gets nothing, and its agent, asking again,
is told so. Denying an admitted machine takes it out of the mesh config in
force: a push still queued for it is skipped in words, and its machine workflow
ends once its queue is empty, as when a machine is removed from mesh.yaml. It
can be admitted again with approve.

--by defaults to the user running the starter; who, when and --reason are kept
in the machine's Enrollment workflow (enroll/<name>).`
	}
	cmd := &cobra.Command{
		Use:     verb + " NAME [--reason R] [--by NAME]",
		Short:   short,
		Long:    long,
		Example: fmt.Sprintf("  starter machine %s edge-9 --reason \"racked in fra1, ticket 4411\"", verb),
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if d.By == "" {
				d.By = operator()
			}
			d.Client = ClientIdentity()
			return a.withConfig(cmd.Context(), nil, func(ctx context.Context, cfg *config.Config, c client.Client) error {
				ctx, cancel := context.WithTimeout(ctx, LeverTimeout)
				defer cancel()
				recs := enroll.In(c, cfg)
				if update == meshapi.UpdateEnrollApprove {
					if err := fits(ctx, recs, cfg, name); err != nil {
						return err
					}
				}
				e, err := recs.Decide(ctx, name, update, d)
				if errors.Is(err, enroll.ErrNoEnrollment) {
					return usagef(err, "%v; %s", err, a.pendingHint(ctx, recs))
				}
				if err != nil {
					return fmt.Errorf("%s machine %s: %w", verb, name, err)
				}
				if a.json() {
					return a.printJSON(e)
				}
				return a.printf("%s\n", decided(e, cfg))
			})
		}),
	}
	cmd.Flags().StringVar(&d.Reason, "reason", "", "why, kept with the decision")
	cmd.Flags().StringVar(&d.By, "by", "", "who decides (default: the user running the starter)")
	return cmd
}

// fits refuses to admit a machine the config in force could not place:
// what it asked with must pass the same checks as a machine in the file.
func fits(ctx context.Context, recs enroll.Temporal, cfg *config.Config, name string) error {
	e, ok, err := recs.Get(ctx, name)
	if err != nil || !ok || e.State == meshapi.EnrollAdmitted {
		return err // Decide says there is none, or that it is admitted
	}
	if _, named := cfg.Machines[name]; named {
		return usagef(nil, "mesh.yaml names machine %s already; an agent asking under its name is not admitted (deny it, or start that agent with another --machine)", name)
	}
	_, left := cfg.Admit([]config.Admitted{{Name: name, Host: e.Ask.Host, Labels: e.Ask.Labels}})
	if why, ok := left[name]; ok {
		return usagef(nil, "machine %s cannot be admitted as it asked (host %s, labels %s): %s", name, e.Ask.Host, config.LabelString(e.Ask.Labels), why)
	}
	return nil
}

// decided words a decision just made.
func decided(e meshapi.Enrollment, cfg *config.Config) string {
	m := e.Ask.Machine
	if e.State == meshapi.EnrollAdmitted {
		return fmt.Sprintf("admitted %s (host %s, labels %s) by %s: the worker adds it within seconds and syncs %s to their newest healthy builds",
			m, e.Ask.Host, config.LabelString(e.Ask.Labels), e.Decided.By, joinOr(cfg.Enroll.Modules, "its modules"))
	}
	return fmt.Sprintf("turned away %s by %s: it gets nothing; if it was in the mesh, its machine workflow ends once its queue is empty", m, e.Decided.By)
}

// pendingHint names the pending machines, for an error naming none.
func (a *app) pendingHint(ctx context.Context, recs enroll.Temporal) string {
	es, err := recs.List(ctx, meshapi.EnrollPending)
	switch {
	case err != nil:
		return "starter machine pending lists the machines that asked"
	case len(es) == 0:
		return "no machine is pending"
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Ask.Machine
	}
	return "pending: " + joinOr(names, "")
}

func (a *app) machinePendingCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "pending",
		Short: "List the machines whose agents asked to enroll and wait for an operator",
		Long: `pending lists the machines whose agents asked to join (host --enroll) and that
no one has admitted or turned away yet, with the host and labels each asked
with and when. Nothing is pushed to them. Admit one with "starter machine
approve NAME", turn it away with "starter machine deny NAME".`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			return a.withConfig(cmd.Context(), nil, func(ctx context.Context, cfg *config.Config, c client.Client) error {
				es, err := enroll.In(c, cfg).List(ctx, meshapi.EnrollPending)
				if err != nil {
					return err
				}
				if a.json() {
					if es == nil {
						es = []meshapi.Enrollment{}
					}
					return a.printJSON(es)
				}
				return writePending(a.stdout, es, time.Now())
			})
		}),
	}
}

// writePending is the pending machines' table, or a line saying there
// are none.
func writePending(w io.Writer, es []meshapi.Enrollment, now time.Time) error {
	if len(es) == 0 {
		_, err := fmt.Fprintln(w, "no machine is pending")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tHOST\tLABELS\tASKED")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\n", e.Ask.Machine, e.Ask.Host, config.LabelString(e.Ask.Labels), max(now.Sub(e.Ask.At), 0).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "admit one with: starter machine approve NAME; turn one away with: starter machine deny NAME")
	return err
}
