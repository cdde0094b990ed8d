package workflows

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// A waiting plan holds one coroutine for all the signals it takes, not one
// per signal name: the footprint of many plans in flight is their
// goroutines. Read from the process's goroutines (a workflow's coroutines
// are goroutines) while the plan waits at a gate.
func TestPlanTakesItsSignalsInOneCoroutine(t *testing.T) {
	h := newPlanHarness(t, targets(tier(1, "edge-1"), tier(2, "control-node"))...)
	var plans, signals, perName int
	var dump string
	var abort *updateResult
	h.env.RegisterDelayedCallback(func() {
		buf := make([]byte, 4<<20)
		dump = string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(dump, "\n\ngoroutine ") {
			switch {
			case strings.Contains(g, "meshroll/workflows.Plan("):
				plans++
			case strings.Contains(g, "(*planSignals).start"):
				signals++
			case strings.Contains(g, ".onSignal["):
				perName++
			}
		}
		abort = h.update(meshapi.UpdateAbort, meshapi.AbortInput{By: "bob", Reason: "seen"})
	}, time.Hour)
	st := h.run(meshapi.PlanInput{Gates: []int{2}})
	abort.ok(t)
	require.Equal(t, meshapi.PlanAborted, st.State)
	require.Equal(t, 1, plans, "one plan waits at its gate; the goroutines:\n%s", dump)
	require.Equal(t, 1, signals, "one coroutine takes the plan's signals; the goroutines:\n%s", dump)
	require.Zero(t, perName, "no coroutine per signal name; the goroutines:\n%s", dump)
}
