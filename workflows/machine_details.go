package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// details is what the Web UI shows as the machine workflow's current
// details, so that a person who opens a machine's workflow sees what it
// runs, what it is pushing and what waits, without running a query. It is
// set on every turn of the loop; setting it issues no command.
func (m *machine) details(ctx workflow.Context) {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**: ", m.in.Machine)
	if m.current != nil {
		fmt.Fprintf(&b, "pushing %s for %s\n\n", buildWords(queued(*m.current)), m.current.Plan)
		if m.budgetWait != "" {
			fmt.Fprintf(&b, "- %s\n", m.budgetWait)
		}
	} else {
		b.WriteString("idle\n\n")
	}
	if m.running != nil {
		b.WriteString("- runs, as its last converged push found it:")
		for i, c := range m.running.Containers {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s generation %d (%s)", c.Module, c.Generation, mesh.ShortDigest(c.Digest))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("- runs: not known to this workflow yet (no push of it has converged); `starter machine show` asks the host\n")
	}
	if len(m.queue) == 0 {
		b.WriteString("- queue: empty\n")
	} else {
		fmt.Fprintf(&b, "- queue (%d):", len(m.queue))
		for i, r := range m.queue {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s for %s", buildWords(queued(r)), r.Plan)
			if urgent(r) {
				b.WriteString(" (rollback: first in line)")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- last sequence sent: %d", m.lastSeq)
	if m.running != nil && m.running.Seq == m.lastSeq && m.running.Plan != "" {
		fmt.Fprintf(&b, ", by %s", m.running.Plan)
	}
	b.WriteString("\n")
	if m.hostLostState != "" {
		fmt.Fprintf(&b, "- host lost its state: %s\n", m.hostLostState)
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// buildWords names a request's build for a person: "host generation 5
// (sha256:0123456789ab)".
func buildWords(q meshapi.QueuedRequest) string {
	return fmt.Sprintf("%s generation %d (%s)", q.Module, q.Generation, mesh.ShortDigest(q.Digest))
}
