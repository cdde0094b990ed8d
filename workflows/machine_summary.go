package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// summaryChange gates the machine workflow's memo: from it on, a machine
// workflow keeps its meshapi.MachineSummary in its memo.
const summaryChange = "machine-summary"

// changedAtChange gates meshapi.SAMachineChanged: from it on, each summary
// published also sets the search attribute to the workflow's time, so that
// a reader keeping every summary lists only what changed since its last look.
const changedAtChange = "machine-changed-at"

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
	if workflow.GetVersion(ctx, changedAtChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, meshapi.SAMachineChanged.ValueSet(workflow.Now(ctx))); err != nil {
		// As for the memo: a reader that misses the change reads every
		// summary again within machinefeed's full look.
		workflow.GetLogger(ctx).Warn("machine summary's change time not published", "machine", m.in.Machine, "error", err)
	}
}
