package fleetui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// planView is one plan in flight as the page shows it.
type planView struct {
	ID     string
	Anchor string
	Module string
	// What says which kind of plan and its build: "merge of host at
	// 5d0e3c1a9f42", "rollback of host", "sync of host on edge-3".
	What    string
	State   string
	Reason  string
	Build   string
	Started time.Time
	// WebUI is the plan's page in the Temporal Web UI; "" when
	// temporal.ui_url is not set.
	WebUI string
	// Error is why the plan's state could not be read.
	Error string
	// Gate is the gate the plan waits at now; Ahead the gates it has not
	// reached.
	Gate  *gateView
	Ahead []gateView
	// Held is why a freeze or the windows hold it; Paused whether an
	// operator paused it.
	Held   string
	Paused bool
	Tiers  []planTier
}

// gateView is a gate and the command that opens it: a tier's gate, or,
// when Checks is set, the inconclusive analysis checks the plan waits on
// (their words, "check error-rate of tier 1 is inconclusive: ..."), which
// approve without --tier passes.
type gateView struct {
	Tier    int
	Command string
	Checks  []string
}

// planTier is one tier of a plan.
type planTier struct {
	Tier  int
	State string
	// Notes are the batch, the failures against the budget and the bake.
	Notes  string
	Policy string
	Done   int
	Total  int
	Counts []meshapi.StateCount
	// Machines are the tier's machines with their progress.
	Machines []planMachine
	Open     bool
	// Checks are the tier's analysis checks, one short line each.
	Checks []checkView
}

// checkView is one analysis check of a tier, as small as the tier's line:
// its verdict and "3/10, 1 failed, last 0.012"; Title is its whole line
// (meshapi.AnalysisCheck.Summary) for the pointer.
type checkView struct {
	Name    string
	Verdict string
	Words   string
	Title   string
}

// planMachine is one machine's progress in a plan.
type planMachine struct {
	Name  string
	State string
	Title string
}

// openPlanTierMax is the most machines a plan's tier lists unfolded.
const openPlanTierMax = 40

// approveCommand is what opens a plan's gate before tier, as the starter
// takes it (internal/cli: plan approve ID --tier N).
func approveCommand(plan string, tier int) string { return meshapi.ApproveCommand(plan, tier) }

// webUILink is a workflow's page in the Temporal Web UI at base, or ""
// without a base.
func webUILink(base, namespace, id string) string { return meshapi.WebUILink(base, namespace, id) }

// anchor is an id attribute for a plan, unique per plan ID.
func anchor(id string) string {
	return "plan-" + strings.NewReplacer("/", "-", "@", "-").Replace(id)
}

// buildPlans words the plans in flight.
func buildPlans(s *Snapshot, uiBase, namespace string) []planView {
	out := make([]planView, 0, len(s.Plans))
	for _, p := range s.Plans {
		out = append(out, planOf(p, uiBase, namespace))
	}
	return out
}

func planOf(p Plan, uiBase, namespace string) planView {
	sum := p.Summary
	v := planView{
		ID: sum.Plan, Anchor: anchor(sum.Plan), Module: sum.Module, State: sum.State, Started: sum.Started,
		WebUI: webUILink(uiBase, namespace, sum.Plan), Error: p.Error, What: planWhat(sum.Plan, sum.Module, sum.Commit),
	}
	st := p.State
	if st == nil {
		return v
	}
	v.State, v.Reason, v.Paused = string(st.State), st.Reason, st.Paused
	if st.Commit != "" && v.What == "" {
		v.What = "merge of " + st.Module + " at " + mesh.ShortCommit(st.Commit)
	}
	if b := st.Build; b != nil {
		v.Build = fmt.Sprintf("%s generation %d (%s, %s)", b.Module, b.Generation, mesh.ShortCommit(b.Commit), mesh.ShortDigest(b.Digest))
	}
	if st.State == meshapi.PlanHeld {
		v.Held = st.Reason
	}
	if checks := st.AnalysisGate(); len(checks) > 0 {
		v.Gate = &gateView{Command: meshapi.ApproveCommand(sum.Plan, -1)}
		for _, c := range checks {
			v.Gate.Checks = append(v.Gate.Checks, c.Inconclusive())
		}
	}
	for _, t := range st.Tiers {
		if t.State == meshapi.TierGated {
			v.Gate = &gateView{Tier: t.Tier, Command: approveCommand(sum.Plan, t.Tier)}
		}
		if t.State == meshapi.TierWaiting && slices.Contains(st.Gates, t.Tier) {
			v.Ahead = append(v.Ahead, gateView{Tier: t.Tier, Command: approveCommand(sum.Plan, t.Tier)})
		}
		v.Tiers = append(v.Tiers, tierOf(t))
	}
	return v
}

// planWhat names a plan by its ID: a merge, a rollback or a sync.
func planWhat(id, module, commit string) string {
	switch {
	case strings.HasPrefix(id, "rollback/"):
		return "rollback of " + module
	case strings.HasPrefix(id, "sync/"):
		parts := strings.Split(id, "/")
		if len(parts) == 3 {
			return "sync of " + parts[2] + " on " + parts[1]
		}
	case commit != "":
		return "merge of " + module + " at " + mesh.ShortCommit(commit)
	}
	return ""
}

func tierOf(t meshapi.TierState) planTier {
	v := planTier{Tier: t.Tier, State: string(t.State), Notes: strings.TrimSuffix(strings.TrimPrefix(t.Notes(), " ("), ")"), Total: len(t.Machines)}
	if p := t.Policy; p != nil {
		var words []string
		if p.MaxParallel > 0 && p.MaxParallel < len(t.Machines) {
			words = append(words, fmt.Sprintf("batches of %d", p.MaxParallel))
		}
		if p.MaxFailed > 0 {
			words = append(words, fmt.Sprintf("%d may fail", p.MaxFailed))
		}
		if p.Bake > 0 {
			words = append(words, "bakes "+p.Bake.String())
		}
		v.Policy = strings.Join(words, ", ")
	}
	for _, m := range t.Machines {
		state := m.StateWord()
		if m.State != meshapi.MachineWaiting && m.State != meshapi.MachinePushing && m.State != meshapi.MachineReverting {
			v.Done++
		}
		title := []string{state}
		if m.Seq > 0 {
			title = append(title, fmt.Sprintf("sequence %d", m.Seq))
		}
		if len(m.Rebased) > 0 {
			title = append(title, "rebased "+strings.Join(m.Rebased, ", "))
		}
		if m.Reason != "" {
			title = append(title, m.Reason)
		}
		v.Machines = append(v.Machines, planMachine{Name: m.Machine, State: state, Title: strings.Join(title, "; ")})
	}
	v.Counts = t.Counts()
	v.Open = len(t.Machines) <= openPlanTierMax
	for _, c := range t.Analysis {
		v.Checks = append(v.Checks, checkOf(c))
	}
	return v
}

// checkOf words a check for its tier's line: "running 3/10, last 0.012",
// with its failures when there are any, when a waiting check first
// measures, and "dry run" when it only reports.
func checkOf(c meshapi.AnalysisCheck) checkView {
	passed, failed, errored := c.Tally()
	words := []string{fmt.Sprintf("%s %d/%d", c.Verdict, passed+failed, c.Count)}
	if failed > 0 {
		words = append(words, fmt.Sprintf("%d failed", failed))
	}
	if errored > 0 {
		words = append(words, fmt.Sprintf("%d unmeasured", errored))
	}
	if c.Verdict == meshapi.AnalysisWaiting && c.FirstDue != nil {
		words = append(words, "first at "+c.FirstDue.UTC().Format("15:04:05 MST"))
	}
	if n := len(c.Measurements); n > 0 {
		words = append(words, "last "+c.Measurements[n-1].ValueWords())
	}
	if c.DryRun {
		words = append(words, "dry run")
	}
	return checkView{Name: c.Check, Verdict: string(c.Verdict), Words: strings.Join(words, ", "), Title: c.Summary()}
}

// recentView is a plan of the recent list.
type recentView struct {
	ID, Anchor, State, WebUI string
	Running                  bool
	Started                  time.Time
	Closed                   *time.Time
}

// buildRecent words the recent plans that have ended: those in flight are
// shown in full already.
func buildRecent(s *Snapshot, uiBase, namespace string) []recentView {
	var out []recentView
	for _, r := range s.Recent {
		if r.Closed == nil {
			continue
		}
		out = append(out, recentOf(r, uiBase, namespace))
	}
	return out
}

func recentOf(r plans.Summary, uiBase, namespace string) recentView {
	return recentView{ID: r.Plan, Anchor: anchor(r.Plan), State: r.State, WebUI: webUILink(uiBase, namespace, r.Plan),
		Running: r.Closed == nil, Started: r.Started, Closed: r.Closed}
}
