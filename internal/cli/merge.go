package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

type mergeOpts struct {
	module string
	commit string
	gates  []int
	force  bool
	wait   bool
	// rollback makes the plan a rollback (starter rollback); commit is
	// then empty.
	rollback *meshapi.Rollback
	// override lets the merge pass freezes and windows (--override-freeze).
	overrideFreeze bool
	override       meshapi.Override
}

func (a *app) mergeCommand() *cobra.Command {
	var o mergeOpts
	cmd := &cobra.Command{
		Use:   "merge --module M --commit C [--gate TIER ...] [--force] [--wait]",
		Short: "Start the roll-out plan for a merge to a module",
		Long: `merge starts the plan that rolls a merge of a module out to the machines
that run it: build, compose, then push tier by tier.

The plan's ID is plan/<module>/<commit>. A merge delivered twice finds the plan
it already started instead of starting another.

--gate makes a tier wait for "starter plan approve" before it is pushed.
--force lets pushes pass an unknown running digest or a host's floor (the host
journals it); operators only.
--override-freeze --reason R lets the plan pass freezes and deployment windows;
every declaration carries "override freeze by <who>: <reason>" and every host
journals it (--by defaults to the user running the starter).
--wait follows the plan to its end; the exit code is 0 when it converged or was
superseded and 3 when it halted, was refused or was aborted.`,
		Example: `  starter merge --module host --commit 0123456789abcdef0123456789abcdef01234567
  starter merge --module host --commit $SHA --gate 2 --wait
  starter merge --module host --commit $SHA --override-freeze --reason "hotfix for incident 42"
  starter merge --module host --commit $SHA --wait --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error { return a.merge(cmd.Context(), o) }),
	}
	f := cmd.Flags()
	f.StringVar(&o.module, "module", "", "module that was merged (required; one of the config's modules)")
	f.StringVar(&o.commit, "commit", "", "full id of the merge commit (required)")
	f.IntSliceVar(&o.gates, "gate", nil, "push tier that waits for approval; repeat or comma-separate for several")
	f.BoolVar(&o.force, "force", false, "let pushes pass an unknown running digest or the host's floor")
	f.BoolVar(&o.wait, "wait", false, "follow the plan to its end and exit 3 unless it converged or was superseded")
	f.BoolVar(&o.overrideFreeze, "override-freeze", false, "pass freezes and deployment windows (needs --reason; journalled)")
	f.StringVar(&o.override.Reason, "reason", "", "why the merge overrides a freeze (with --override-freeze)")
	f.StringVar(&o.override.By, "by", "", "who overrides (with --override-freeze; default: the user running the starter)")
	_ = cmd.MarkFlagRequired("module")
	_ = cmd.MarkFlagRequired("commit")
	return cmd
}

// mergeResult is merge's JSON output. Reason and Tiers are set only with
// --wait, where State is the final state.
type mergeResult struct {
	Plan     string               `json:"plan"`
	RunID    string               `json:"run_id"`
	Existing bool                 `json:"existing"`
	State    meshapi.PlanStatus   `json:"state"`
	Reason   *string              `json:"reason,omitempty"`
	Tiers    *[]meshapi.TierState `json:"tiers,omitempty"`
}

func (a *app) merge(ctx context.Context, o mergeOpts) error {
	began := time.Now()
	var in meshapi.PlanInput
	check := func(cfg *config.Config, path string) (err error) {
		in, err = planInput(cfg, path, o)
		return err
	}
	return a.withConfig(ctx, check, func(ctx context.Context, cfg *config.Config, c client.Client) error {
		return a.startPlan(ctx, c, cfg.Temporal.TaskQueue, in, o.wait, began)
	})
}

// startPlan starts the merge's plan and says so; with wait it follows the
// plan to its end, timed from when the command began (or the plan's own
// start on the server, when that is known).
func (a *app) startPlan(ctx context.Context, c client.Client, taskQueue string, in meshapi.PlanInput, wait bool, began time.Time) error {
	started, err := plans.Start(ctx, c, taskQueue, in)
	if err != nil {
		return err
	}
	res := mergeResult{Plan: started.ID, RunID: started.RunID, Existing: started.Existing}

	if !wait {
		if !a.json() {
			return a.printStarted(started)
		}
		st, err := firstState(ctx, c, started.ID)
		if err != nil {
			// The plan is started either way; say so rather than fail.
			fmt.Fprintf(a.stderr, "starter: warning: started plan %s but could not read its state: %v\n", started.ID, err)
		}
		res.State = st.State
		return a.printJSON(res)
	}

	if !a.json() {
		if err := a.printStarted(started); err != nil {
			return err
		}
	}
	// Time the plan from its start on the server: a re-delivered merge
	// follows a plan that may have started long before this call.
	sum, err := plans.Describe(ctx, c, started.ID)
	if err != nil {
		sum = plans.Summary{Started: began}
	}
	final, err := a.follow(ctx, c, started.ID, planClock(sum, time.Now))
	if err != nil {
		return err
	}
	if a.json() {
		tiers := final.Tiers
		if tiers == nil {
			tiers = []meshapi.TierState{}
		}
		res.State, res.Reason, res.Tiers = final.State, &final.Reason, &tiers
		if err := a.printJSON(res); err != nil {
			return err
		}
	}
	return endError(final)
}

func (a *app) printStarted(s plans.Started) error {
	if s.Existing && strings.HasPrefix(s.ID, "rollback/") {
		return a.printf("a rollback of this module is already running as plan %s (run %s); not starting another: follow it with starter plan watch %s\n", s.ID, s.RunID, s.ID)
	}
	if s.Existing {
		return a.printf("plan %s already started by this merge (run %s); not starting another\n", s.ID, s.RunID)
	}
	if strings.HasPrefix(s.ID, "rollback/") {
		return a.printf("started plan %s (starter plan watch %s follows it)\n", s.ID, s.ID)
	}
	return a.printf("started plan %s\n", s.ID)
}

// moduleTargets is the module's machines, or a usage error naming the
// modules the config knows when it is not one of them.
func moduleTargets(cfg *config.Config, path, module string) ([]meshapi.Target, error) {
	targets, err := cfg.Targets(module)
	if errors.Is(err, config.ErrUnknownModule) {
		known := "none"
		if names := cfg.ModuleNames(); len(names) > 0 {
			known = strings.Join(names, ", ")
		}
		return nil, usagef(config.ErrUnknownModule,
			"unknown module %q (known: %s); add it to modules: in %s", module, known, path)
	}
	return targets, err
}

// planInput checks what can be checked without Temporal, in the order an
// operator fixes things: the config, the module, the commit, the gates.
func planInput(cfg *config.Config, path string, o mergeOpts) (meshapi.PlanInput, error) {
	targets, err := moduleTargets(cfg, path, o.module)
	if err != nil {
		return meshapi.PlanInput{}, err
	}
	in := meshapi.PlanInput{Module: o.module, Commit: o.commit, Policy: cfg.PushPolicy(), Force: o.force, Rollback: o.rollback}
	switch {
	case o.overrideFreeze:
		ov := o.override
		if ov.By == "" {
			ov.By = operator()
		}
		ov.Client = ClientIdentity()
		in.OverrideFreeze = &ov
	case o.override.Reason != "" || o.override.By != "":
		return meshapi.PlanInput{}, usagef(nil, "--reason and --by go with --override-freeze")
	}
	if err := in.Validate(); err != nil {
		return meshapi.PlanInput{}, &UsageError{Err: err}
	}
	var tiers []int
	for _, t := range targets {
		if !slices.Contains(tiers, t.Tier) {
			tiers = append(tiers, t.Tier)
		}
	}
	in.Gates = slices.Clone(o.gates)
	slices.Sort(in.Gates)
	in.Gates = slices.Compact(in.Gates)
	for _, g := range in.Gates {
		if slices.Contains(tiers, g) {
			continue
		}
		if len(tiers) == 0 {
			return meshapi.PlanInput{}, usagef(nil, "--gate %d: no machine in %s runs module %s, so it has no tiers", g, path, o.module)
		}
		return meshapi.PlanInput{}, usagef(nil, "--gate %d: no machine running module %s is on tier %d (its tiers: %s)",
			g, o.module, g, joinInts(tiers))
	}
	return in, nil
}

// firstState reads a plan's state right after it started. The query can
// fail until a worker has run the plan's first task, so it is read again
// for a few seconds.
func firstState(ctx context.Context, c client.Client, id string) (meshapi.PlanState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := plans.WaitUntil(ctx, c, id, "a first state", func(meshapi.PlanState) bool { return true }, 250*time.Millisecond)
	if err != nil {
		return meshapi.PlanState{}, planError(id, err)
	}
	return st, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
