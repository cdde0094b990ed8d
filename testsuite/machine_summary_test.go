package testsuite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// summariesShowHosts waits until the machine workflows' summaries, as the
// visibility store has them, show the last sequence each host applied and
// nothing in flight or queued: the memo each keeps once its pushes ended.
// It waits for the machines named, or with none every machine of the
// worker's config; an overview read after it shows what the workflows
// settled on (the store is a moment behind them).
func (s *stack) summariesShowHosts(names ...string) {
	s.t.Helper()
	if len(names) == 0 {
		names = s.cfg.MachineNames()
	}
	eventually(s.t, 30*time.Second, "every machine workflow's summary to show its host's last sequence", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sums, err := plans.MachineSummaries(ctx, s.c, s.namespace)
		if err != nil {
			return false
		}
		for _, name := range names {
			sum, ok := sums.ByMachine[name]
			if !ok || sum.Machine != name || sum.LastSeq != s.hosts[name].Report().LastSeq || sum.Current != nil || sum.Queue != 0 {
				return false
			}
		}
		return true
	})
}

// TestStatusReadsMachineWorkflowsWithoutAWorker: an overview reads the
// machine workflows from the summaries they keep in their memos, in one
// visibility list, not by a query to each (which needs a worker to answer,
// and at ten thousand machines takes tens of seconds). With the worker
// stopped, nothing is left to answer a query, and status still shows each
// machine workflow's last sequence, with no error.
func TestStatusReadsMachineWorkflowsWithoutAWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	s.converge("host", s.commit("host"))
	s.summariesShowHosts()

	s.worker.Stop()
	st, err := s.status()
	require.NoError(t, err)
	require.Len(t, st.Machines, len(s.hosts))
	for _, m := range st.Machines {
		require.Empty(t, m.WorkflowError, m.Machine)
		require.NotNil(t, m.LastSeq, m.Machine)
		require.Equal(t, s.hosts[m.Machine].Report().LastSeq, *m.LastSeq, m.Machine)
		require.Equal(t, 0, *m.Queue, m.Machine)
	}
}

// TestCaptureMachineSummaryHistory records a machine workflow that keeps
// its summary in its memo (change machine-summary): one push, published
// as it starts and as it ends. Like the other captures it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureMachineSummaryHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	s := captureStack(t, exampleMesh())
	s.converge("host", s.commit("host"))
	s.summariesShowHosts()

	s.writeHistories(capturedRun{"machine-summary-published.machine-summary", meshapi.MachineID("edge-1"), ""})
}
