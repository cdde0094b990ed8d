package workflows

import (
	"fmt"
	"strconv"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// maxMachinesAttribute is the largest MeshrollMachines value a plan sets, in
// bytes of its JSON encoding (how the server measures it), below the
// server's default per-value limit of 2,048.
const maxMachinesAttribute = 2000

// keywordListSize is the size of a keyword list search attribute value as
// the server measures it: its JSON encoding.
func keywordListSize(vs []string) int {
	n := 2 // []
	for i, v := range vs {
		if i > 0 {
			n++ // ,
		}
		n += len(strconv.Quote(v))
	}
	return n
}

// publishMachines names the plan's machines in the MeshrollMachines search
// attribute, so that the Web UI and `starter plan list --machine` find the
// plans that touch a machine. A plan too wide for the server's size limit
// (the server would terminate it, BadSearchAttributes) leaves it unset and
// is found by module and commit instead.
func (p *plan) publishMachines(ctx workflow.Context, targets []meshapi.Target) {
	machines := make([]string, len(targets))
	for i, t := range targets {
		machines[i] = t.Machine
	}
	if size := keywordListSize(machines); size > maxMachinesAttribute {
		workflow.GetLogger(ctx).Warn("too many machines for the machines search attribute; left unset",
			"machines", len(machines), "bytes", size, "limit", maxMachinesAttribute)
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, meshapi.SAMachines.ValueSet(machines)); err != nil {
		workflow.GetLogger(ctx).Warn("could not set the machines search attribute", "error", err)
	}
}

// publish keeps the MeshrollState search attribute equal to the plan's
// state, so that plans are findable by state in the Web UI and the CLI.
func (p *plan) publish() {
	if p.st.State == p.published {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(p.ctx, meshapi.SAState.ValueSet(string(p.st.State))); err != nil {
		workflow.GetLogger(p.ctx).Warn("could not set the state search attribute", "error", err)
		return
	}
	p.published = p.st.State
}

// detailMeasurements is how many of a check's latest measurements the
// current details list, keeping them a screen long.
const detailMeasurements = 10

// details is what the Web UI shows as the plan's current details; the state
// search attribute follows it.
func (p *plan) details(ctx workflow.Context, now string) {
	p.publish()
	p.now = now
	p.showDetails(ctx)
	p.announceState(ctx)
}

// showDetails writes the current details: the plan's last words (now)
// over its tiers, each with its machines counted by state, those a person
// must look at named, and its analysis checks. A measurement arriving
// shows through it without changing the plan's words, and so do answers
// (see showAnswers). Each tier's counts, names and group notes walk its
// machines, so it runs per step and per hundredth of the answers, never
// per answer.
func (p *plan) showDetails(ctx workflow.Context) {
	now := p.now
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** %s", p.in.Module, mesh.ShortCommit(p.in.Commit))
	if p.st.Build != nil {
		fmt.Fprintf(&b, " (generation %d, %s)", p.st.Build.Generation, mesh.ShortDigest(p.st.Build.Digest))
	}
	fmt.Fprintf(&b, ": %s\n\n", now)
	for _, t := range p.st.Tiers {
		fmt.Fprintf(&b, "- tier %d: %s%s; %s\n", t.Tier, t.State, t.Notes(), t.CountWords())
		if named, more := t.ToLookAt(namedInReason); len(named) > 0 {
			fmt.Fprintf(&b, "  - %s", strings.Join(named, " "))
			if more > 0 {
				fmt.Fprintf(&b, " and %d more (`starter plan show %s --machines %s` lists them)", more, p.st.Plan, meshapi.ToLookAtStates())
			}
			b.WriteString("\n")
		}
		for _, c := range t.Analysis {
			fmt.Fprintf(&b, "  - analysis %s\n", c.Summary())
			ms := c.Measurements
			if n := len(ms) - detailMeasurements; n > 0 {
				fmt.Fprintf(&b, "    - … %d earlier\n", n)
				ms = ms[n:]
			}
			for _, m := range ms {
				fmt.Fprintf(&b, "    - %s %s %s", m.At.UTC().Format("15:04:05"), m.ValueWords(), m.Verdict())
				if m.Error != "" {
					fmt.Fprintf(&b, ": %s", m.Error)
				}
				b.WriteString("\n")
			}
		}
	}
	for _, t := range p.st.NotifyTrouble {
		fmt.Fprintf(&b, "- %s\n", t.Words())
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// showAnswers shows the answers taken since the details were last written
// once they are a hundredth of the plan's machines (every answer of a plan
// of fewer than 200): a tier's counts move in the Web UI while it pushes,
// and the walks of showDetails stay about a hundred per plan, not one per
// answer. The plan's own steps write the details as a tier ends.
func (p *plan) showAnswers(ctx workflow.Context) {
	if p.unshown == 0 || p.unshown < len(p.byMachine)/100 {
		return
	}
	p.unshown = 0
	p.showDetails(ctx)
}
