package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// DefaultJournalEntries is how many journal entries "machine show" prints
// unless --journal says otherwise.
const DefaultJournalEntries = 10

func (a *app) machineCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "machine",
		Short: "List the mesh's machines, show what one runs and was told, print a container's logs, sync one, or admit one that asked",
		Long: `machine reads the machines of the mesh config: what each host reports it
runs, what its machine workflow is pushing and has queued, and the host's
journal of what it was told.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.machineListCommand(), a.machineShowCommand(), a.machineLogsCommand(), a.machineSyncCommand(),
		a.machinePendingCommand(), a.machineDecideCommand("approve", meshapi.UpdateEnrollApprove), a.machineDecideCommand("deny", meshapi.UpdateEnrollDeny))
	return cmd
}

func (a *app) machineListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the machines with their tier, modules, last sequence, queue and host status",
		Long: `list shows every machine of the mesh config with its tier and modules, what
its machine workflow says (LAST SEQ sent, QUEUE of waiting requests, "+1"
while one is being pushed; "-" when no plan has pushed the machine yet, "?"
when its machine workflow could not be read), and HOST STATUS, read from the worker's
fleet picture as status reads it (with how long ago the host was heard;
stale or unknown as status says) or else asked of the host directly: ok when
the host answered its report, unreachable when it did not,
unauthorized when it turned the machine's token away (401 or 403), error when
it answered with something else (a bad ca_file). Below the table, each host
that did not answer ok is named with why, and for a token with the setting
that gives it (MESHROLL_MACHINES_<NAME>_TOKEN or machines.<name>.token); so
is each machine workflow that could not be read, once for all when they
failed alike (their list failed at thousands of machines).

An unreachable host is listed, not a failure. An unreachable Temporal is:
the hosts are still listed, then list exits 1.`,
		Example: `  starter machine list
  starter machine list --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := a.loadConfig(cmd.Context())
			if err != nil {
				return err
			}
			src, closePic, _ := a.statusPicture(cmd.Context(), cfg, path)
			defer closePic()
			src.Dial = a.dialer(cfg)
			rows, terr := machines.List(cmd.Context(), cfg, src)
			return printRead(a, rows, func(w io.Writer, rows []machines.Row) error { return writeMachineList(w, rows, terr) }, terr)
		}),
	}
}

// hostCell is a row's HOST STATUS: with how long ago the worker heard the
// host, when it was read from the fleet picture.
func hostCell(r machines.Row) string {
	if r.HostHeardAt == nil {
		return r.HostStatus
	}
	return r.HostStatus + ", " + r.HostFreshness
}

// writeMachineList is machine list's table, and below it why a host or a
// machine workflow could not be read (not exiting, which list ends with).
func writeMachineList(w io.Writer, rows []machines.Row, exiting error) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tTIER\tMODULES\tHOST\tLAST SEQ\tQUEUE\tHOST STATUS")
	for _, r := range rows {
		seq := "-"
		if r.WorkflowError != "" {
			seq = "?"
		}
		if r.LastSeq != nil {
			seq = strconv.FormatUint(*r.LastSeq, 10)
		}
		queue := queueCell(r)
		modules := strings.Join(r.Modules, ",")
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Machine, r.Tier, dash(modules), r.Host, seq, queue, hostCell(r))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if _, err := io.WriteString(w, readErrors(rows, exiting)); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// queueCell is a machine workflow's queue as the tables show it: requests
// waiting, "+1" while one is being pushed, "-" when the machine has no
// workflow yet, "?" when it could not be asked.
func queueCell(r machines.Row) string {
	switch {
	case r.Queue != nil && r.Current != nil:
		return strconv.Itoa(*r.Queue) + "+1"
	case r.Queue != nil:
		return strconv.Itoa(*r.Queue)
	case r.WorkflowError != "":
		return "?"
	default:
		return "-"
	}
}

// machineNameArg takes exactly one machine name.
func machineNameArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one machine name (see \"starter machine list\"), got %d arguments", cmd.CommandPath(), len(args))
	}
	return nil
}

// loadConfigFor loads the mesh config for a command about one machine,
// which must be one of its machines.
func (a *app) loadConfigFor(ctx context.Context, machine string) (*config.Config, string, error) {
	cfg, path, err := a.loadConfig(ctx)
	if err != nil {
		return nil, "", err
	}
	if err := knownMachine(cfg, path, machine); err != nil {
		return nil, "", err
	}
	return cfg, path, nil
}

// knownMachine is nil for a machine of cfg, and otherwise a usage error
// naming the machines it has and the file (path) to add it to.
func knownMachine(cfg *config.Config, path, name string) error {
	if _, ok := cfg.Machines[name]; ok {
		return nil
	}
	known := "none"
	if names := cfg.MachineNames(); len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	if len(cfg.Enroll.Modules) > 0 {
		return usagef(nil, "unknown machine %q (known: %s); add it to machines: in %s, or, if its agent asked to enroll, admit it: starter machine approve %s",
			name, known, path, name)
	}
	return usagef(nil, "unknown machine %q (known: %s); add it to machines: in %s", name, known, path)
}

func (a *app) machineShowCommand() *cobra.Command {
	var entries int
	cmd := &cobra.Command{
		Use:   "show NAME [--journal N]",
		Short: "Show what a machine runs, what its workflow is pushing, and its journal",
		Long: `show reads one machine three ways, each on its own:

  the host's report     what runs: module, digest, generation, the plan
                        and sequence that brought it, and state of each
                        container; and the plan that last declared the
                        machine
  the machine workflow  the last sequence it sent, the request it is
                        pushing and the ones queued behind it
  the host's journal    the latest --journal entries: what the host was
                        told (sequence, plan, digests, force) and what it did

A host that cannot be reached is said so and the workflow part is still
shown (and the reverse when Temporal cannot be reached); show then exits 1.
A machine no plan has pushed yet has no machine workflow; that is not an
error.`,
		Example: `  starter machine show edge-1
  starter machine show control-node --journal 50 --output json`,
		Args: machineNameArg,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, args []string) error {
		if entries < 0 {
			return usagef(nil, "--journal %d: want 0 or more", entries)
		}
		name := args[0]
		cfg, _, err := a.loadConfigFor(cmd.Context(), name)
		if err != nil {
			return err
		}
		m := cfg.Machines[name]
		v, err := machines.Show(cmd.Context(), a.dialer(cfg), name, m, entries)
		return printRead(a, v, writeMachineView, err)
	})
	cmd.Flags().IntVar(&entries, "journal", DefaultJournalEntries, "how many of the host journal's latest entries to show (0 for none)")
	return cmd
}

// writeMachineView is machine show's table: the config's line, then the
// host's containers, the workflow's queue and the journal, each saying
// plainly when it could not be read.
func writeMachineView(w io.Writer, v machines.Detail) error {
	var b strings.Builder
	fmt.Fprintf(&b, "machine %s  tier %d  modules %s  host %s\n", v.Machine, v.Tier, dash(strings.Join(v.Modules, ", ")), v.Host)
	if len(v.Labels) > 0 {
		fmt.Fprintf(&b, "labels %s\n", config.LabelString(v.Labels))
	}

	b.WriteString("\n")
	switch {
	case v.HostError != "":
		fmt.Fprintf(&b, "%s\n", v.HostError)
	default:
		fmt.Fprintf(&b, "host reports last seq %d", deref(v.Seq))
		if v.LastPlan != "" {
			fmt.Fprintf(&b, ", declared by %s", v.LastPlan)
		}
		b.WriteString("\n")
		if v.ReportedMachine != "" {
			fmt.Fprintf(&b, "warning: the host says it is machine %s, not %s; check machines.%s.host\n", v.ReportedMachine, v.Machine, v.Machine)
		}
		if len(v.Containers) == 0 {
			b.WriteString("no containers\n")
		} else {
			// PLAN and SEQ are the declaration that put each digest here;
			// a host that does not say gives the last declaration's.
			unsaid := false
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODULE\tDIGEST\tGEN\tPLAN\tSEQ\tSTATE\tSINCE")
			for _, c := range v.Containers {
				plan, seq, said := mesh.BroughtBy(c.Introduced, c.Plan, c.Seq)
				unsaid = unsaid || !said
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", c.Module, dash(mesh.ShortDigest(c.Digest)), c.Generation, dash(plan), seq, c.State, dash(c.Since))
			}
			_ = tw.Flush()
			if unsaid {
				b.WriteString("(the host does not say which plan brought each build; PLAN and SEQ are its last declaration's)\n")
			}
		}
	}

	b.WriteString("\n")
	id := meshapi.MachineID(v.Machine)
	switch {
	case v.WorkflowError != "":
		fmt.Fprintf(&b, "workflow %s: %s\n", id, v.WorkflowError)
	case v.Workflow == nil:
		fmt.Fprintf(&b, "workflow %s: no machine workflow yet (no plan has pushed it)\n", id)
	default:
		wf := v.Workflow
		pushing := "idle"
		if wf.Current != nil {
			pushing = "pushing " + wf.Current.Request
		}
		fmt.Fprintf(&b, "workflow %s: last seq %d, %s, %d queued\n", id, wf.LastSeq, pushing, len(wf.Queue))
		if wf.BudgetWait != "" {
			fmt.Fprintf(&b, "%s\n", wf.BudgetWait)
		}
		if wf.Current != nil || len(wf.Queue) > 0 {
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#\tPLAN\tMODULE\tDIGEST\tGEN")
			row := func(pos string, r meshapi.QueuedRequest) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", pos, r.Plan, r.Module, dash(mesh.ShortDigest(r.Digest)), r.Generation)
			}
			if wf.Current != nil {
				row("now", *wf.Current)
			}
			for i, r := range wf.Queue {
				pos := strconv.Itoa(i + 1)
				if r.Rollback {
					pos += " rollback, first in line"
				}
				row(pos, r)
			}
			_ = tw.Flush()
		}
		if len(wf.Floor) > 0 {
			b.WriteString("floor (what ran healthy here, by the workflow's own record; no push goes below it):\n")
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODULE\tGEN\tDIGEST\tCOMMIT")
			for _, f := range wf.Floor {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", f.Module, f.Generation, mesh.ShortDigest(f.Digest), dash(mesh.ShortCommit(f.Commit)))
			}
			_ = tw.Flush()
		}
		if wf.HostLostState != "" {
			fmt.Fprintf(&b, "warning: %s\n", wf.HostLostState)
		}
	}

	b.WriteString("\n")
	switch {
	case v.JournalError != "" && v.HostError != "":
		// The host's line above says it.
	case v.JournalError != "" && len(v.Journal) == 0:
		fmt.Fprintf(&b, "%s\n", v.JournalError)
	case len(v.Journal) == 0:
		b.WriteString("journal: no entries\n")
	default:
		fmt.Fprintf(&b, "journal (latest %d, newest first):\n", len(v.Journal))
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "INDEX\tTIME\tOUTCOME\tSEQ\tPLAN\tCONTAINERS\tFORCE")
		for _, e := range v.Journal {
			cs := make([]string, len(e.Containers))
			for i, c := range e.Containers {
				cs[i] = c.Module + "=" + dash(mesh.ShortDigest(c.Digest))
			}
			force := "-"
			if e.Force {
				force = "forced"
				if e.ForcedPast != "" {
					force += " past " + e.ForcedPast
				}
			}
			outcome := e.Outcome
			if e.Code != "" {
				outcome += " (" + e.Code + ")"
			}
			if e.Revert {
				outcome += " (revert)"
			}
			if e.Rollback {
				outcome += " (rollback)"
				if e.ForcedPast != "" {
					force = "rollback past " + e.ForcedPast
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Index, e.Time.Local().Format(timeLayout), outcome, e.Seq,
				dash(e.Plan), dash(strings.Join(cs, ",")), oneLine(force))
		}
		_ = tw.Flush()
		for _, e := range v.Journal {
			switch {
			case e.Revert:
				fmt.Fprintf(&b, "  %d: put back on what it ran after %s failed here: %s\n", e.Index, e.Plan, oneLine(e.Reason))
			case e.Reason != "":
				fmt.Fprintf(&b, "  %d: %s\n", e.Index, oneLine(e.Reason))
			}
		}
		if v.JournalError != "" {
			fmt.Fprintf(&b, "%s\n", v.JournalError)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// dialer is a.dial for cfg's Temporal, for machines.List and Show to call
// while they ask the hosts.
func (a *app) dialer(cfg *config.Config) machines.Dial {
	return func(ctx context.Context) (client.Client, error) { return a.dial(ctx, cfg) }
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
