package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// publish keeps the machine's summary (last sequence, what it pushes, how
// much waits) in its memo, where the overviews read every machine in one
// visibility list instead of querying each workflow. The loop calls it
// only when it is about to wait, and it upserts only a summary that differs
// from the last one published, so a push costs two memo upserts (it
// started, it ended) however many turns it takes, and each run publishes
// at its first wait, continued as new or not.
//
// Beside the memo it sets meshapi.SAMachineChanged, the time a reader
// keeping every summary lists changes since, but only when the last one it
// set is meshapi.MachineChangedEvery old or more: a push shorter than that
// costs one search attribute upsert instead of two (each is a history event
// and a visibility write, at every machine of a plan), and a workflow the
// plan's hand-over started, which sets the change time as it starts it,
// none at its first push. A summary is thus
// never newer than its change time by more than MachineChangedEvery, which
// a reader's look reaches back past (machinefeed.DefaultOverlap).
func (m *machine) publish(ctx workflow.Context) {
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
	now := workflow.Now(ctx)
	if now.Sub(m.changedAt) < meshapi.MachineChangedEvery {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, meshapi.SAMachineChanged.ValueSet(now)); err != nil {
		// As for the memo: a reader that misses the change reads every
		// summary again within machinefeed's full look.
		workflow.GetLogger(ctx).Warn("machine summary's change time not published", "machine", m.in.Machine, "error", err)
		return
	}
	m.changedAt = now
}
