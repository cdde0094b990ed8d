package workflows

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

func manyMachines(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("edge-%03d", i)
	}
	return ms
}

// A plan composes composeBatch machines per activity, and every machine
// still gets its own declaration.
func TestPlanComposesInBatches(t *testing.T) {
	machines := manyMachines(2*composeBatch + 7)
	h := newPlanHarness(t, tier(1, machines...)...)
	var single atomic.Int32
	base := h.composeFn
	h.composeFn = func(in composeCall) (meshapi.ComposeResult, error) {
		single.Add(1)
		return base(in)
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	got := slices.Clone(h.composeBatches)
	slices.Sort(got)
	require.Equal(t, []int{7, composeBatch, composeBatch}, got, "batch sizes")
	require.ElementsMatch(t, machines, h.handed(), "every machine pushed once")
	require.EqualValues(t, len(machines), single.Load(), "each machine composed once")
}

// A batch that names a machine it could not compose halts the plan naming
// that machine, and nothing is pushed.
func TestPlanComposeBatchFailureNamesMachine(t *testing.T) {
	machines := manyMachines(composeBatch + 1)
	h := newPlanHarness(t, tier(1, machines...)...)
	base := h.composeFn
	h.composeFn = func(in composeCall) (meshapi.ComposeResult, error) {
		if in.Target.Machine == machines[composeBatch] {
			return meshapi.ComposeResult{}, permanent("machine not in the worker's mesh config")
		}
		return base(in)
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, machines[composeBatch]+": machine not in the worker's mesh config")
	require.Empty(t, h.enqueued)
}

// The push activity answers the plan: each push is answered exactly once,
// and the answer is remembered for re-delivery.
func TestMachinePushAnswersPlanOnce(t *testing.T) {
	h := newMachineHarness(t)
	a, b := req("plan/host/a", "host", 1), req("plan/ctl/b", "ctl", 1)
	h.signalAt(0, a, b)
	next := h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})
	require.Len(t, h.pushes, 2)
	require.Len(t, h.answers, 2, "one answer per push: %+v", h.answers)
	for _, r := range []meshapi.PushRequest{a, b} {
		got, ok := h.answer(r.Request)
		require.True(t, ok, "%s answered", r.Request)
		require.Equal(t, meshapi.MachineConverged, got.Outcome)
	}
	require.Len(t, next.Recent, 2, "answers remembered across continue-as-new")
	require.Equal(t, uint64(2), next.LastSeq)
}

// A failed push is answered by the machine workflow.
func TestMachineFailedPushAnsweredByWorkflow(t *testing.T) {
	h := newMachineHarness(t)
	h.push = func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
		return meshapi.PushOutcome{}, permanent("host unreachable")
	}
	r := req("plan/host/a", "host", 1)
	h.signalAt(0, r)
	h.signalAt(time.Hour, req("plan/ctl/b", "ctl", 1))
	h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})
	got, ok := h.answer(r.Request)
	require.True(t, ok)
	require.Equal(t, meshapi.MachineFailed, got.Outcome)
	require.Contains(t, got.Reason, "host unreachable")
}

func permanent(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, "Test", nil)
}

// A plan whose machines do not fit one search attribute value leaves
// MeshrollMachines unset rather than be terminated by the server; a small
// plan sets it.
func TestPlanMachinesAttributeCapped(t *testing.T) {
	for _, tc := range []struct {
		machines int
		wantSet  bool
	}{{3, true}, {300, false}} {
		t.Run(fmt.Sprint(tc.machines), func(t *testing.T) {
			h := newPlanHarness(t, tier(1, manyMachines(tc.machines)...)...)
			var mu sync.Mutex
			set := false
			h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				sa, _ := args.Get(0).(temporal.SearchAttributes)
				if _, ok := sa.GetKeywordList(meshapi.SAMachines); ok {
					mu.Lock()
					set = true
					mu.Unlock()
				}
			}).Return(nil)
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			require.Equal(t, tc.wantSet, set, "machines search attribute set (%d bytes, limit %d)",
				keywordListSize(manyMachines(tc.machines)), maxMachinesAttribute)
		})
	}
}

func TestKeywordListSize(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want int
	}{
		{nil, 2},
		{[]string{"a"}, len(`["a"]`)},
		{[]string{"edge-1", "control-node"}, len(`["edge-1","control-node"]`)},
	} {
		if got := keywordListSize(tc.in); got != tc.want {
			t.Errorf("keywordListSize(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A plan of at most one compose batch builds and composes in one activity
// (versionBuildCompose); a larger one builds, then composes in batches.
// Either way every machine is composed once and pushed once.
func TestPlanBuildsAndComposesInOneActivityUpToABatch(t *testing.T) {
	for _, tc := range []struct {
		machines  int
		composing int   // BuildAndCompose calls
		batches   []int // every compose, sorted, the one with the build included
	}{
		{1, 1, []int{1}},
		{composeBatch, 1, []int{composeBatch}},
		{composeBatch + 1, 0, []int{1, composeBatch}},
	} {
		t.Run(fmt.Sprintf("%d machines", tc.machines), func(t *testing.T) {
			machines := manyMachines(tc.machines)
			h := newPlanHarness(t, tier(1, machines...)...)
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			require.Equal(t, tc.composing, h.buildsComposing, "builds that composed too")
			got := slices.Clone(h.composeBatches)
			slices.Sort(got)
			require.Equal(t, tc.batches, got)
			require.ElementsMatch(t, machines, h.handed(), "every machine pushed once")
			require.NotNil(t, st.Build)
		})
	}
}

// A composition that fails transiently with the build is not the plan's
// end: the build is done, and the plan composes again by ComposeTargets,
// under its retries, and converges on the same build.
func TestPlanComposesAgainWhenComposingWithTheBuildFailed(t *testing.T) {
	h := newPlanHarness(t, tier(1, "edge-1", "edge-2")...)
	base := h.composeFn
	var calls atomic.Int32
	h.composeFn = func(in composeCall) (meshapi.ComposeResult, error) {
		if calls.Add(1) == 1 {
			return meshapi.ComposeResult{}, fmt.Errorf("host %s: connection refused", in.Target.Machine)
		}
		return base(in)
	}
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Equal(t, 1, h.buildsComposing)
	require.Equal(t, []int{2, 2}, h.composeBatches, "composed with the build (failed), then by ComposeTargets")
	require.ElementsMatch(t, []string{"edge-1", "edge-2"}, h.enqueued[0])
}
