package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

func (a *app) planCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "List plans; show, watch, approve, pause, resume or abort one",
		Long: `plan lists plans, and reads and steers one plan, named by its ID:
plan/<module>/<commit> (what "starter merge" and "starter plan list" print).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.listCommand(), a.showCommand(), a.watchCommand(), a.approveCommand(), a.pauseCommand(), a.resumeCommand(), a.abortCommand())
	return cmd
}

func (a *app) showCommand() *cobra.Command {
	limit := measurementLimit{n: DefaultMeasurements}
	var only machineStates
	cmd := &cobra.Command{
		Use:   "show ID [--measurements N|all] [--machines STATE,...]",
		Short: "Show a plan's state, tier by tier and machine by machine, with its analysis checks",
		Long: `show prints the plan's state, its machines tier by tier, and under each tier
with analysis checks each check's line (its verdict, good measurements of the
count it needs, failures of those allowed, the last value and why) and its
latest --measurements measurements (time UTC, value, verdict, error), with a
line counting the earlier ones. --machines lists only the machines in the
states it names (as the STATE column words them), each tier counted under
its rows: the failed machines of a tier of thousands. --output json prints
the whole state, every measurement and machine included, whatever
--measurements and --machines say.`,
		Example: `  starter plan show plan/host/0123456789abcdef0123456789abcdef01234567
  starter plan show plan/host/$SHA --measurements all
  starter plan show plan/host/$SHA --machines failed,refused
  starter plan show plan/host/$SHA --output json`,
		Args: planIDArg,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(ctx context.Context, c client.Client) error {
				st, err := plans.State(ctx, c, args[0])
				if err != nil {
					return planError(args[0], err)
				}
				if a.json() {
					return a.printJSON(st)
				}
				withBudgetWaits(ctx, st, func(ctx context.Context, machine string) (meshapi.MachineState, error) {
					ctx, cancel := context.WithTimeout(ctx, budgetAskTimeout)
					defer cancel()
					return plans.MachineState(ctx, c, machine)
				})
				return a.printState(st, a.nextStep(ctx, st, a.freezesOf(c)), limit, only)
			})
		}),
	}
	cmd.Flags().Var(&limit, "measurements", "how many of each analysis check's latest measurements to list: a number (0 for none) or all")
	cmd.Flags().Var(&only, "machines", "list only the machines in these states, comma-separated: "+strings.Join(meshapi.StateWords(), ", "))
	return cmd
}

// machineStates is the --machines flag: the state words (as
// MachineProgress.StateWord words them) whose machines plan show lists;
// empty lists every machine.
type machineStates map[string]bool

func (f *machineStates) String() string {
	var words []string
	for _, w := range meshapi.StateWords() {
		if (*f)[w] {
			words = append(words, w)
		}
	}
	return strings.Join(words, ",")
}

func (f *machineStates) Set(s string) error {
	if *f == nil {
		*f = machineStates{}
	}
	known := meshapi.StateWords()
	for _, w := range strings.Split(s, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		if !slices.Contains(known, w) {
			return fmt.Errorf("no machine state %q; a machine in a plan is %s", w, strings.Join(known, ", "))
		}
		(*f)[w] = true
	}
	return nil
}

func (f *machineStates) Type() string { return "STATE,..." }

// lists says whether plan show lists a machine in state word.
func (f machineStates) lists(word string) bool { return len(f) == 0 || f[word] }

// printState is plan show's table, under its header and the step the plan
// waits on a person for (next, when not ""), listing the machines only
// lists (all when it is empty). Under each tier's machines go its counts
// by state (a tier of more than listTierUpTo, or any when only leaves
// some out), its groups (how many of each group's machines are done) and
// its analysis checks, with as many of their measurements as limit lets
// through.
func (a *app) printState(st meshapi.PlanState, next string, limit measurementLimit, only machineStates) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s  module %s  commit %s  state %s", st.Plan, st.Module, st.Commit, st.State)
	if st.Paused && st.State != meshapi.PlanPaused {
		b.WriteString(" (paused)")
	}
	if len(st.Gates) > 0 {
		fmt.Fprintf(&b, "  gates %s", joinInts(st.Gates))
	}
	reason := st.Reason
	if reason == "" {
		reason = "-"
	}
	fmt.Fprintf(&b, "  reason %s\n", reason)
	if next != "" {
		b.WriteString(next + "\n")
	}
	b.WriteString("\n")

	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tMACHINE\tSTATE\tSEQ\tREASON")
	listed, shown := make([]int, len(st.Tiers)), 0
	for i, t := range st.Tiers {
		for _, m := range t.Machines {
			if !only.lists(m.StateWord()) {
				continue
			}
			listed[i]++
			shown++
			seq := "-"
			if m.Seq > 0 {
				seq = strconv.FormatUint(m.Seq, 10)
			}
			why := m.Reason
			if len(m.Rebased) > 0 {
				why = strings.TrimPrefix(why+"; rebased "+strings.Join(m.Rebased, ","), "; ")
			}
			if why == "" {
				why = "-"
			}
			fmt.Fprintf(tw, "%d (%s)\t%s\t%s\t%s\t%s\n", t.Tier, t.State, m.Machine, m.StateWord(), seq, oneLine(why))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	// Each tier's checks go under its machines' rows, outside the
	// tabwriter, so that every tier's rows keep one set of columns.
	rows := strings.SplitAfter(table.String(), "\n")
	if shown == 0 && len(only) > 0 {
		// A header over no rows reads as a broken table.
		fmt.Fprintf(&b, "no machine is %s\n", strings.Join(strings.Split(only.String(), ","), " or "))
	} else {
		b.WriteString(rows[0])
	}
	rows = rows[1:]
	for i, t := range st.Tiers {
		n := min(listed[i], len(rows))
		b.WriteString(strings.Join(rows[:n], ""))
		rows = rows[n:]
		if len(t.Machines) > listTierUpTo || len(only) > 0 {
			fmt.Fprintf(&b, "  tier %d: %s\n", t.Tier, t.CountWords())
		}
		if groups := t.GroupNotes(); len(groups) > 0 {
			fmt.Fprintf(&b, "  tier %d by %s: %s\n", t.Tier, strings.Join(t.Policy.GroupBy, ","), strings.Join(groups, ", "))
		}
		if len(t.Analysis) == 0 {
			continue
		}
		if err := writeAnalysis(&b, t, limit); err != nil {
			return err
		}
	}
	b.WriteString(strings.Join(rows, ""))
	for _, t := range st.NotifyTrouble {
		fmt.Fprintf(&b, "%s\n", t.Words())
	}
	return a.printf("%s", b.String())
}

// controlResult is the JSON output of the control commands.
type controlResult struct {
	Plan   string             `json:"plan"`
	Action string             `json:"action"`
	Tier   *int               `json:"tier,omitempty"`
	State  meshapi.PlanStatus `json:"state"`
}

func (a *app) approveCommand() *cobra.Command {
	var tier int
	var by string
	cmd := &cobra.Command{
		Use:   "approve ID [--tier N] [--by NAME]",
		Short: "Open a plan's gate so the gated tier is pushed, or pass an inconclusive analysis check",
		Long: `approve opens the gate the plan is waiting at now, or, with --tier, the gate
before that tier ahead of time. A plan waiting on an inconclusive analysis
check (its provider unreachable, no data) is at a gate too: approve without
--tier passes the check, and the plan records who did (--by). The plan
refuses when it is not waiting at a gate (and no --tier is given), has no
gate before --tier, or has ended.`,
		Args: planIDArg,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, args []string) error {
		in := meshapi.ApproveInput{By: by, Client: ClientIdentity()}
		if cmd.Flags().Changed("tier") {
			in.Tier = &tier
		}
		return a.control(cmd.Context(), args[0], meshapi.UpdateApprove, in, in.Tier)
	})
	cmd.Flags().IntVar(&tier, "tier", 0, "tier whose gate to open (default: the gate the plan waits at now)")
	cmd.Flags().StringVar(&by, "by", operator(), "who approves, for the plan's log")
	return cmd
}

func (a *app) pauseCommand() *cobra.Command {
	var in meshapi.PauseInput
	cmd := &cobra.Command{
		Use:   "pause ID [--reason R] [--by NAME]",
		Short: "Hold a plan before its next tier",
		Long: `pause holds the plan before it starts its next tier; pushes already under way
finish. "starter plan resume" lets it go on.`,
		Args: planIDArg,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, args []string) error {
		in.Client = ClientIdentity()
		return a.control(cmd.Context(), args[0], meshapi.UpdatePause, in, nil)
	})
	cmd.Flags().StringVar(&in.Reason, "reason", "", "why, for the plan's log")
	cmd.Flags().StringVar(&in.By, "by", operator(), "who pauses, for the plan's log")
	return cmd
}

func (a *app) resumeCommand() *cobra.Command {
	var in meshapi.ResumeInput
	cmd := &cobra.Command{
		Use:   "resume ID [--by NAME]",
		Short: "Let a paused plan go on",
		Args:  planIDArg,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, args []string) error {
		in.Client = ClientIdentity()
		return a.control(cmd.Context(), args[0], meshapi.UpdateResume, in, nil)
	})
	cmd.Flags().StringVar(&in.By, "by", operator(), "who resumes, for the plan's log")
	return cmd
}

func (a *app) abortCommand() *cobra.Command {
	var in meshapi.AbortInput
	cmd := &cobra.Command{
		Use:   "abort ID [--reason R] [--by NAME]",
		Short: "End a plan: its queued pushes are withdrawn, later tiers untouched",
		Long: `abort ends the plan. Its pushes still queued at their machines are withdrawn;
machines already pushed keep what they got, and later tiers are not touched.`,
		Args: planIDArg,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, args []string) error {
		in.Client = ClientIdentity()
		return a.control(cmd.Context(), args[0], meshapi.UpdateAbort, in, nil)
	})
	cmd.Flags().StringVar(&in.Reason, "reason", "", "why, for the plan's log and its final reason")
	cmd.Flags().StringVar(&in.By, "by", operator(), "who aborts, for the plan's log")
	return cmd
}

func (a *app) control(ctx context.Context, id, update string, arg any, tier *int) error {
	return a.withClient(ctx, func(ctx context.Context, c client.Client) error {
		// approve without --tier opens whichever gate the plan waits at;
		// read which, only to say so.
		shown := tier
		var checks []meshapi.TierCheck
		if update == meshapi.UpdateApprove && tier == nil {
			shown, checks = waitingAt(ctx, c, id)
		}
		res, err := plans.Control(ctx, c, id, update, arg)
		if err != nil {
			return controlError(ctx, c, id, err)
		}
		if a.json() {
			return a.printJSON(controlResult{Plan: id, Action: update, Tier: shown, State: res.State})
		}
		switch update {
		case meshapi.UpdateApprove:
			return a.printf("%s\n", approvedWords(id, shown, checks))
		case meshapi.UpdatePause:
			return a.printf("paused plan %s; it holds before its next tier\n", id)
		case meshapi.UpdateResume:
			return a.printf("resumed plan %s\n", id)
		default:
			return a.printf("aborted plan %s\n", id)
		}
	})
}

// waitingAt returns the tier whose gate the plan is waiting to have
// approved, or the inconclusive analysis checks it waits on; neither when
// that cannot be told quickly.
func waitingAt(ctx context.Context, c client.Client, id string) (*int, []meshapi.TierCheck) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := plans.Progress(ctx, c, id)
	if err != nil {
		return nil, nil
	}
	if checks := st.AnalysisGate(); len(checks) > 0 {
		return nil, checks
	}
	for _, t := range st.Tiers {
		if t.State == meshapi.TierGated {
			n := t.Tier
			return &n, nil
		}
	}
	return nil, nil
}

// approvedWords is what approve says it did: opened a tier's gate, passed
// the inconclusive checks the plan waited on, or, when which could not be
// read, opened whatever it waited at.
func approvedWords(id string, tier *int, checks []meshapi.TierCheck) string {
	switch {
	case tier != nil:
		return fmt.Sprintf("approved tier %d of plan %s", *tier, id)
	case len(checks) > 0:
		names := make([]string, 0, len(checks))
		for _, c := range checks {
			names = append(names, fmt.Sprintf("check %s of tier %d", c.Check.Check, c.Tier))
		}
		return fmt.Sprintf("passed the inconclusive %s of plan %s", strings.Join(names, " and "), id)
	}
	return fmt.Sprintf("approved the gate plan %s was waiting at", id)
}

// controlError words a failed update: the plan's own refusal as it gave it,
// an ended plan as ended rather than missing.
func controlError(ctx context.Context, c client.Client, id string, err error) error {
	if clean, ok := rejection(err); ok {
		return clean
	}
	if errors.Is(err, plans.ErrNotFound) {
		// An update to a closed workflow is "not found" too.
		if st, serr := plans.State(ctx, c, id); serr == nil && st.State.Terminal() {
			return &messageError{msg: fmt.Sprintf("plan %s already ended %s", id, withReason(st.State, st.Reason)), err: err}
		}
		return notFound(id, err)
	}
	return err
}

// withClient loads the config, dials Temporal and runs fn.
func (a *app) withClient(ctx context.Context, fn func(context.Context, client.Client) error) error {
	return a.withConfig(ctx, nil, func(ctx context.Context, _ *config.Config, c client.Client) error {
		return fn(ctx, c)
	})
}

// withConfig loads the config and runs check on it (when not nil) before
// Temporal is dialled, so that what the command line got wrong fails
// without a connection; then it dials and runs fn with the config and the
// client, which it closes after.
func (a *app) withConfig(ctx context.Context, check func(cfg *config.Config, path string) error, fn func(context.Context, *config.Config, client.Client) error) error {
	cfg, path, err := a.loadConfig(ctx)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(cfg, path); err != nil {
			return err
		}
	}
	c, err := a.dial(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, cfg, c)
}

// planIDArg takes exactly one non-empty plan ID.
func planIDArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one plan ID (plan/<module>/<commit>), got %d arguments", cmd.CommandPath(), len(args))
	}
	if strings.TrimSpace(args[0]) == "" {
		return fmt.Errorf("%s: the plan ID is empty", cmd.CommandPath())
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
