package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
)

// recorded reads, from the plan's own history, the container of module in
// the declaration the plan composed for machine: what the plan recorded
// that it intends to send.
func recorded(ctx context.Context, c client.Client, plan, machine, module string) (Version, error) {
	dc := payloads.Converter
	// composing activity scheduled → the machine's index in it, and
	// whether it is BuildAndCompose
	type slot struct {
		index int
		both  bool
	}
	batches := map[int64]slot{}
	it := c.GetWorkflowHistory(ctx, plan, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return Version{}, fmt.Errorf("history of %s: %w", plan, err)
		}
		// A plan composes many machines per ComposeTargets activity, or
		// all of a small plan's in BuildAndCompose (whose result may leave
		// them to a ComposeTargets after it).
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			var targets []meshapi.Target
			both := a.GetActivityType().GetName() == "BuildAndCompose"
			switch {
			case both:
				var in meshapi.BuildComposeInput
				if dc.FromPayloads(a.GetInput(), &in) == nil {
					targets = in.Targets
				}
			case a.GetActivityType().GetName() == "ComposeTargets":
				var in meshapi.ComposeTargetsInput
				if dc.FromPayloads(a.GetInput(), &in) == nil {
					targets = in.Targets
				}
			}
			for i, t := range targets {
				if t.Machine == machine {
					batches[ev.GetEventId()] = slot{i, both}
				}
			}
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			b, ok := batches[a.GetScheduledEventId()]
			if !ok {
				continue
			}
			var res meshapi.ComposeTargetsResult
			if b.both {
				var both meshapi.BuildComposeResult
				if err := dc.FromPayloads(a.GetResult(), &both); err != nil {
					return Version{}, fmt.Errorf("decode %s's composition of %s: %w", plan, machine, err)
				}
				if both.Composed == nil {
					continue // composed again by a ComposeTargets after it
				}
				res = *both.Composed
			} else if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
				return Version{}, fmt.Errorf("decode %s's composition of %s: %w", plan, machine, err)
			}
			i := b.index
			if i >= len(res.Results) {
				return Version{}, fmt.Errorf("%s's composition has no entry for %s", plan, machine)
			}
			if ctr, ok := res.Results[i].Declaration.Container(module); ok {
				return Version{Digest: ctr.Digest, Generation: ctr.Generation}, nil
			}
		}
	}
	return Version{}, fmt.Errorf("plan %s recorded no %s for %s", plan, module, machine)
}

func (r *run) client(machine string) (*host.HTTPClient, error) {
	return host.NewHTTPClient(r.hosts[machine].url, "", nil)
}

func (r *run) report(ctx context.Context, machine string) (mesh.Report, error) {
	hc, err := r.client(machine)
	if err != nil {
		return mesh.Report{}, err
	}
	rep, err := hc.Report(ctx)
	if err != nil {
		return mesh.Report{}, fmt.Errorf("report of %s: %w", machine, err)
	}
	return rep, nil
}

// showRuns prints what a machine reports running.
func (r *run) showRuns(ctx context.Context, machine string) error {
	rep, err := r.report(ctx, machine)
	if err != nil {
		return err
	}
	return r.showReport(rep)
}

func (r *run) showReport(rep mesh.Report) error {
	last := ""
	if len(rep.Containers) > 0 {
		last = ", declared last by " + rep.Containers[0].Plan
	}
	r.say("%s runs (by its own report, last seq %d%s):", rep.Machine, rep.LastSeq, last)
	for _, c := range rep.Containers {
		by, _, _ := mesh.BroughtBy(c.Introduced, c.Plan, c.Seq)
		r.say("  %-16s %s  generation %-3d %-8s brought by %s", c.Module, short(c.Digest), c.Generation, c.State, by)
	}
	return nil
}

// journal prints and records a machine's latest journal entries.
func (r *run) journal(ctx context.Context, machine string) error {
	hc, err := r.client(machine)
	if err != nil {
		return err
	}
	page, err := hc.Journal(ctx, 0, JournalEntries)
	if err != nil {
		return fmt.Errorf("journal of %s: %w", machine, err)
	}
	lines := []JournalLine{}
	r.say("%s (runtime %s):", machine, page.Runtime)
	r.say("  %5s  %-13s %4s  %-62s %s", "INDEX", "OUTCOME", "SEQ", "PLAN", "CONTAINERS")
	for _, e := range page.Entries {
		l := JournalLine{Index: e.Index, Time: e.Time, Outcome: e.Outcome, Seq: e.Seq, Plan: e.Plan, Message: e.Message}
		for _, c := range e.Containers {
			l.Containers = append(l.Containers, c.Module+"="+short(c.Digest))
		}
		lines = append(lines, l)
		r.say("  %5d  %-13s %4d  %-62s %s", l.Index, l.Outcome, l.Seq, l.Plan, strings.Join(l.Containers, " "))
	}
	r.sum.Journals[machine] = lines
	return nil
}

func (r *run) step(n int, what string) {
	fmt.Fprintln(r.o.Out)
	r.say("step %d: %s", n, what)
}

// say narrates one line with the time since the demo began.
func (r *run) say(format string, args ...any) {
	fmt.Fprintf(r.o.Out, "[%6.1fs] %s\n", time.Since(r.began).Seconds(), fmt.Sprintf(format, args...))
}

// short is a digest or commit cut for reading.
func short(s string) string {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func withReason(state meshapi.PlanStatus, reason string) string {
	if reason == "" {
		return string(state)
	}
	return string(state) + ": " + reason
}
