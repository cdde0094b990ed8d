package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// summaryChange gates the machine workflow's memo: from it on, a machine
// workflow keeps its meshapi.MachineSummary in its memo.
const summaryChange = "machine-summary"

// publish keeps the machine's summary (last sequence, what it pushes, how
// much waits) in its memo, where the overviews read every machine in one
// visibility list instead of querying each workflow. The loop calls it
// only when it is about to wait, and it upserts only a summary that differs
// from the last one published, so a push costs two upserts (it started, it
// ended) however many turns it takes, and each run publishes at its first
// wait, continued as new or not.
func (m *machine) publish(ctx workflow.Context) {
	if workflow.GetVersion(ctx, summaryChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	s := m.state().Summary()
	if m.published != nil && m.published.Equal(s) {
		return
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{meshapi.MemoMachine: s}); err != nil {
		// Only an unencodable memo fails, which a summary is not; the
		// overviews then ask the workflow directly.
		workflow.GetLogger(ctx).Warn("machine summary not published", "machine", m.in.Machine, "error", err)
		return
	}
	m.published = &s
}
