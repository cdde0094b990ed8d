package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// fleetOf is n machines in tier 1 and n in tier 2, named by tier and number.
func fleetOf(n int) []meshapi.Target {
	var ts []meshapi.Target
	for tier := 1; tier <= 2; tier++ {
		for i := range n {
			ts = append(ts, meshapi.Target{Machine: fmt.Sprintf("t%d-m%05d", tier, i), Tier: tier, Modules: []string{"host"}})
		}
	}
	return ts
}

// A tier of 10,000 machines whose answers all arrive before the plan's next
// workflow task is taken in that one task inside the SDK's deadlock
// detector (one second without yielding, as on a real worker; the test
// environment runs it too, given raceSlowdown's seconds under the race
// detector): each answer costs the plan the same whatever
// the fleet's size. Taking an answer by walking every machine made that
// task quadratic, and plans of 2,000 machines and more failed every
// workflow task for good (TMPRL1101).
func TestPlanTakesTenThousandAnswersInOneTask(t *testing.T) {
	const n = 10_000
	h := newPlanHarness(t, fleetOf(n)...)
	h.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: raceSlowdown * time.Second})
	// The environment fails a workflow blocked for 3s of wall clock; the
	// hand-over activities signal 10,000 answers under the race detector,
	// on a box CI shares with the integration tests. Only the plan's own
	// tasks are held to a deadline here, by the detector above.
	h.env.SetTestTimeout(2 * time.Minute)
	h.together = true
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	converged := 0
	for _, tier := range st.Tiers {
		for _, m := range tier.Machines {
			if assert.Equal(t, meshapi.MachineConverged, m.State, m.Machine) {
				converged++
			}
		}
	}
	assert.Equal(t, 2*n, converged)
	assert.Len(t, h.enqueued, 2*n/handBatch, "each tier handed over by activities of %d machines", handBatch)
	assert.Equal(t, 2*n/handBatch, h.handedByActivity, "as regular activities, not in the plan's workflow task")
	assert.Zero(t, h.handedLocally)
}

// A hand-over of more than handLocally machines runs as regular activities
// of handBatch machines, so that no workflow task of the plan stays open
// while hundreds of answers arrive (the server fails a task with more than
// 100 signals buffered behind it, and a local hand-over failed with it is
// handed again, and answered again); a few machines are handed by one local
// activity, sparing a small plan the round trips.
func TestPlanHandsLargeTiersOverByActivities(t *testing.T) {
	cases := []struct {
		machines          int
		local, byActivity int
	}{
		{machines: 3, local: 2, byActivity: 0},
		{machines: handLocally, local: 2, byActivity: 0},
		{machines: handLocally + 1, local: 0, byActivity: 2},
		{machines: 250, local: 0, byActivity: 6},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.machines), func(t *testing.T) {
			h := newPlanHarness(t, fleetOf(c.machines)...)
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
			assert.Equal(t, c.local, h.handedLocally, "local hand-overs")
			assert.Equal(t, c.byActivity, h.handedByActivity, "hand-over activities")
			handed := 0
			for _, e := range h.enqueued {
				handed += len(e)
				assert.LessOrEqual(t, len(e), max(handBatch, handLocally))
			}
			assert.Equal(t, 2*c.machines, handed, "every machine handed once")
		})
	}
}
