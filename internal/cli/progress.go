package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

func (a *app) watchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a plan to its end, printing its progress tier by tier",
		Long: `watch follows a plan until it ends, printing a line each time the plan, a
tier or a machine moves, each time an analysis check takes a measurement and
each time a check's verdict changes, prefixed with the time since the plan
started:

  [12.3s] tier 1: pushing  edge-1=converged edge-2=pushing
  [2m41.0s] tier 1 error-rate: 0.012 passed (3 of 10)
  [6m11.0s] tier 1 check error-rate passed: 10 of 10 measured, 0 failed of 1 allowed, last 0.011

A plan that has already ended prints its final state at once. Like
"starter merge --wait", watch exits 0 when the plan converged or was
superseded and 3 when it halted, was refused or was aborted. With
--output json it prints nothing until the end, then the plan's final state
(the shape of "starter plan show --output json").

Interrupting watch stops following; the plan goes on in Temporal.`,
		Example: `  starter plan watch plan/host/0123456789abcdef0123456789abcdef01234567
  starter plan watch plan/host/$SHA --output json`,
		Args: planIDArg,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(ctx context.Context, c client.Client) error {
				return a.watch(ctx, c, args[0])
			})
		}),
	}
}

func (a *app) watch(ctx context.Context, c client.Client, id string) error {
	sum, err := plans.Describe(ctx, c, id)
	if err != nil {
		return planError(id, err)
	}
	if !a.json() {
		if err := a.printf("following plan %s (started %s)\n", id, sum.Started.Local().Format(timeLayout)); err != nil {
			return err
		}
	}
	final, err := a.follow(ctx, c, id, planClock(sum, time.Now))
	if err != nil {
		return err
	}
	if a.json() {
		if err := a.printJSON(final); err != nil {
			return err
		}
	}
	return endError(final)
}

// follow waits for the plan's end and returns its final state. For a
// person (table output) it prints progress as it goes and the final line,
// timed by clock; merge --wait and plan watch share it so that they read
// the same.
func (a *app) follow(ctx context.Context, c client.Client, id string, clock func() time.Duration) (meshapi.PlanState, error) {
	var p *progressPrinter
	var progress func(meshapi.PlanState)
	if !a.json() {
		p = newProgressPrinter(a.stdout, clock)
		freezes := a.freezesOf(c)
		p.next = func(st meshapi.PlanState) string { return a.nextStep(ctx, st, freezes) }
		progress = p.show
	}
	final, err := plans.Wait(ctx, c, id, WaitInterval, progress)
	if err != nil {
		return meshapi.PlanState{}, interrupted(id, planError(id, err))
	}
	if p != nil {
		if err := p.final(final); err != nil {
			return meshapi.PlanState{}, err
		}
	}
	return final, nil
}

// endError is what a followed plan's end means for the exit code:
// converged and superseded are success (a superseded plan's machines run
// something newer), anything else is ExitPlanFailed.
func endError(final meshapi.PlanState) error {
	switch final.State {
	case meshapi.PlanConverged, meshapi.PlanSuperseded:
		return nil
	}
	return &PlanEndedError{State: final}
}

// planClock measures elapsed time from the plan's start as the server
// recorded it, so that following a plan started an hour ago says so, and
// stops at its close, so that watching an ended plan shows how long it
// took rather than how long ago it started. A plan without a start time
// (the describe failed) is timed from now.
func planClock(sum plans.Summary, now func() time.Time) func() time.Duration {
	start := sum.Started
	if start.IsZero() {
		start = now()
	}
	return func() time.Duration {
		t := now()
		if sum.Closed != nil && t.After(*sum.Closed) {
			t = *sum.Closed
		}
		return t.Sub(start)
	}
}

// progressPrinter prints what changed in a plan since the last state it
// saw: the plan's phase, each tier whose state or machines moved, and, once
// each time the plan starts waiting on a person, what they must do. It
// prints whole lines and never redraws, so its output reads the same on a
// terminal, in a CI log and in a file.
type progressPrinter struct {
	w io.Writer
	// elapsed prefixes each line with "[12.3s] "; nil prints none.
	elapsed func() time.Duration
	// next is the step a person must take for the plan to go on (see
	// app.nextStep), asked each time the plan's line changes; nil prints
	// none.
	next     func(meshapi.PlanState) string
	lastPlan string
	lastTier map[int]string
	// lastMeasured and lastVerdict are, by analysisKey, how many of a
	// check's measurements were printed and the verdict last printed.
	lastMeasured map[string]int
	lastVerdict  map[string]meshapi.Verdict
}

func newProgressPrinter(w io.Writer, elapsed func() time.Duration) *progressPrinter {
	return &progressPrinter{w: w, elapsed: elapsed, lastTier: map[int]string{},
		lastMeasured: map[string]int{}, lastVerdict: map[string]meshapi.Verdict{}}
}

func (p *progressPrinter) show(st meshapi.PlanState) {
	// The terminal state is the final line's.
	moved := false
	if !st.State.Terminal() {
		line := st.Plan + " " + withReason(st.State, st.Reason)
		if st.Paused && st.State != meshapi.PlanPaused {
			line += " (paused)"
		}
		if line != p.lastPlan {
			p.lastPlan, moved = line, true
			_ = p.println(line)
		}
	}
	for _, t := range st.Tiers {
		line := tierLine(t)
		if p.lastTier[t.Tier] != line {
			p.lastTier[t.Tier] = line
			_ = p.println(line)
		}
		for _, line := range p.analysisLines(t) {
			_ = p.println(line)
		}
	}
	// Once per wait: the plan's line changes when it starts waiting at a
	// gate, a pause or a hold, and again when it goes on.
	if moved && p.next != nil {
		if next := p.next(st); next != "" {
			_ = p.println(next)
		}
	}
}

// final prints the plan's end: "[41.0s] plan/host/<commit> converged".
func (p *progressPrinter) final(st meshapi.PlanState) error {
	return p.println(st.Plan + " " + withReason(st.State, st.Reason))
}

func (p *progressPrinter) println(line string) error {
	if p.elapsed != nil {
		line = "[" + formatElapsed(p.elapsed()) + "] " + line
	}
	if _, err := fmt.Fprintln(p.w, line); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// formatElapsed is a duration to a tenth of a second, in the fewest units
// that hold it: 12.3s, 2m03.4s, 1h02m03.4s.
func formatElapsed(d time.Duration) string {
	if d < 0 {
		d = 0 // server and local clocks disagree
	}
	d = d.Truncate(100 * time.Millisecond)
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	s := (d % time.Minute).Seconds()
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm%04.1fs", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm%04.1fs", m, s)
	}
	return fmt.Sprintf("%.1fs", s)
}

// tierLine is one tier's progress: "tier 1: pushing  edge-1=converged
// edge-2=pushing" (a push waiting for room in the plan's hand-over window
// reads waiting-turn), with, where the tier's policy makes them matter, its
// batch ("batch 2 of 3"), its failures against its budget ("1 failed of 1
// allowed") and when its bake ends ("baking until 14:05:00 UTC").
func tierLine(t meshapi.TierState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tier %d: %s%s ", t.Tier, t.State, t.Notes())
	for _, m := range t.Machines {
		fmt.Fprintf(&b, " %s=%s", m.Machine, m.StateWord())
	}
	return b.String()
}

// timeLayout is how tables print times: local, to the second.
const timeLayout = "2006-01-02 15:04:05"
