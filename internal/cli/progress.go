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

A tier of more than 20 machines is counted by state instead, with its
failed, refused and put-back machines named (the first five); its line is
printed at once when one of them fails or the tier moves on, and every 10s
while only its counts move:

  [41.0s] tier 2: pushing  3333 machines: 1 failed, 998 pushing, 1500 waiting-turn, 834 converged; edge-0412=failed

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
		p.next = func(st meshapi.PlanState) string {
			if st.State == meshapi.PlanHeld && st.IsSummary() {
				// Which freezes hold it depends on the machines it has
				// still to push, which a summary does not list.
				if whole, err := plans.State(ctx, c, id); err == nil {
					st = whole
				}
			}
			return a.nextStep(ctx, st, freezes)
		}
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
	// lastTier is, by tier, the line printed last, and lastKey and
	// lastAt what of it must print at once when it changes and when it
	// was printed (see countsEvery).
	lastTier map[int]string
	lastKey  map[int]string
	lastAt   map[int]time.Duration
	// lastMeasured and lastVerdict are, by analysisKey, how many of a
	// check's measurements were printed and the verdict last printed.
	lastMeasured map[string]int
	lastVerdict  map[string]meshapi.Verdict
}

func newProgressPrinter(w io.Writer, elapsed func() time.Duration) *progressPrinter {
	return &progressPrinter{w: w, elapsed: elapsed, lastTier: map[int]string{}, lastKey: map[int]string{}, lastAt: map[int]time.Duration{},
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
		if line, ok := p.tierMoved(t); ok {
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

// tierMoved is the tier's line when it is to be printed: it changed, and,
// when only a large tier's counts changed, countsEvery has passed since
// its line was printed last (without a clock, at once).
func (p *progressPrinter) tierMoved(t meshapi.TierState) (string, bool) {
	line, key := tierLine(t)
	if line == p.lastTier[t.Tier] {
		return "", false
	}
	var now time.Duration
	if p.elapsed != nil {
		now = p.elapsed()
		_, printed := p.lastTier[t.Tier]
		if printed && key == p.lastKey[t.Tier] && now-p.lastAt[t.Tier] < countsEvery {
			return "", false
		}
	}
	p.lastTier[t.Tier], p.lastKey[t.Tier], p.lastAt[t.Tier] = line, key, now
	return line, true
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

// listTierUpTo is the most machines a tier's progress line names one by
// one. A larger tier's line counts its machines by state instead and names
// only those a person must look at (see tierLine), so that following a
// tier of thousands prints lines a person can read: what the plan's
// summary, which following polls, keeps of a tier.
const listTierUpTo = meshapi.SummaryListsUpTo

// namedOnLine is how many of a large tier's failed, refused or put-back
// machines its line names; plan show --machines lists them all.
const namedOnLine = meshapi.SummaryNames

// countsEvery is how often a large tier's line is printed again when only
// its counts moved: they move with every answer, and a line every poll
// would scroll past the lines that matter. A change of the tier's state,
// batch, failures or named machines prints at once.
const countsEvery = 10 * time.Second

// tierLine is one tier's progress: "tier 1: pushing  edge-1=converged
// edge-2=pushing" (a push waiting for room in the plan's hand-over window
// reads waiting-turn), with, where the tier's policy makes them matter, its
// batch ("batch 2 of 3"), its failures against its budget ("1 failed of 1
// allowed") and when its bake ends ("baking until 14:05:00 UTC"). A tier
// of more than listTierUpTo machines reads "tier 2: pushing  3333
// machines: 1 failed, 521 pushing, 2811 converged; edge-7=failed".
//
// key is what of the line must print at once when it changes: the whole
// line for a tier named machine by machine; for a larger one its state,
// batch, failures and named machines, not its counts (nor its groups'
// counts in its notes).
func tierLine(t meshapi.TierState) (line, key string) {
	var b strings.Builder
	fmt.Fprintf(&b, "tier %d: %s%s ", t.Tier, t.State, t.Notes())
	if t.Size() <= listTierUpTo {
		for _, m := range t.Machines {
			fmt.Fprintf(&b, " %s=%s", m.Machine, m.StateWord())
		}
		return b.String(), b.String()
	}
	head := b.String()
	names := ""
	if named, more := t.ToLookAt(namedOnLine); len(named) > 0 {
		names = "; " + strings.Join(named, " ")
		if more > 0 {
			names += fmt.Sprintf(" and %d more (plan show --machines %s lists them)", more, meshapi.ToLookAtStates())
		}
	}
	key = fmt.Sprintf("%s|%d|%d|%s", t.State, t.Batch, t.Failed, names)
	return head + " " + t.CountWords() + names, key
}

// timeLayout is how tables print times: local, to the second.
const timeLayout = "2006-01-02 15:04:05"
