package testsuite

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/fleetui"
	"github.com/meshroll/meshroll/internal/machinefeed"
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
		sums, err := plans.MachineSummaries(ctx, s.c, s.namespace, s.cfg.Temporal.TaskQueue)
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
// machine workflow's last sequence, with no error. The list is the mesh's
// own: another mesh's machine workflow in the same namespace, on a task
// queue of its own (temporal.task_queue), is not read.
func TestStatusReadsMachineWorkflowsWithoutAWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	s.converge("host", s.commit("host"))
	s.summariesShowHosts()

	other := meshapi.MachineID("other-mesh-m1")
	_, err := s.c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: other, TaskQueue: "other-mesh"}, meshapi.MachineWorkflowType)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the other mesh's machine workflow to be listed in the namespace", func() bool {
		return slices.Contains(s.list("WorkflowType = 'Machine' AND ExecutionStatus = 'Running'"), other)
	})
	sums, err := plans.MachineSummaries(t.Context(), s.c, s.namespace, s.cfg.Temporal.TaskQueue)
	require.NoError(t, err)
	require.NotContains(t, sums.ByMachine, "other-mesh-m1")
	require.NotContains(t, sums.Unpublished, "other-mesh-m1", "another mesh's machine workflow is not this mesh's to read")
	require.Len(t, sums.ByMachine, len(s.hosts))

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

// TestMachineFeedFollowsChangesWithoutListingEveryMachine: the worker's
// feed of the machine workflows' summaries (package machinefeed) lists them
// all once, and from then on reads only the workflows whose summary changed
// since its last look (the time each sets in meshroll's
// MeshrollMachineChanged search attribute). A second build's pushes reach
// it with the whole list an hour away, and the fleet page's status reads
// the machine workflows from it.
func TestMachineFeedFollowsChangesWithoutListingEveryMachine(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	s.converge("host", s.commit("host"))
	s.summariesShowHosts()

	feed := machinefeed.New(machinefeed.Visibility{Client: s.c, Namespace: s.namespace, TaskQueue: s.cfg.Temporal.TaskQueue},
		machinefeed.Options{Every: 100 * time.Millisecond, Full: time.Hour, Log: zerolog.New(zerolog.NewTestWriter(t))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go feed.Run(ctx)
	feedShowsHosts := func() bool {
		sums, _, ok := feed.Summaries(ctx)
		if !ok {
			return false
		}
		for name, h := range s.hosts {
			sum, ok := sums.ByMachine[name]
			if !ok || sum.LastSeq != h.Report().LastSeq || sum.Current != nil || sum.Queue != 0 {
				return false
			}
		}
		return true
	}
	eventually(t, 30*time.Second, "the feed's first list to show every host's last sequence", feedShowsHosts)

	s.converge("host", s.commit("host"))
	eventually(t, 30*time.Second, "the feed to show the second build's pushes, by the changes alone", feedShowsHosts)

	st, err := fleetui.Reader{Config: s.cfg, Client: s.c, Catalogue: s.cat, Feed: feed}.Status(ctx)
	require.NoError(t, err)
	require.NotNil(t, st.WorkflowsFedAt, "the page's status is read from the feed")
	require.Len(t, st.Machines, len(s.hosts))
	for _, m := range st.Machines {
		require.NotNil(t, m.LastSeq, m.Machine)
		require.Equal(t, s.hosts[m.Machine].Report().LastSeq, *m.LastSeq, m.Machine)
	}
}
