package workflows

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// A relay passes its answers on in bundles: at once when a hundred wait or
// the last has come, after a second otherwise, and, once it has waited ten
// times, only in full bundles and with the last — so that answers
// trickling in never cost the plan a signal each. It takes answers alone
// and in the workers' bundles alike. Repeats and answers it does not wait
// for are dropped; a plan that is gone ends it.
func TestRelayPassesAnswersOnInBundles(t *testing.T) {
	type arrival struct {
		at      time.Duration
		request int // -1: a request the relay does not wait for
	}
	at := func(every time.Duration, from, to int) []arrival {
		var as []arrival
		for i := from; i < to; i++ {
			as = append(as, arrival{at: time.Duration(i-from+1) * every, request: i})
		}
		return as
	}
	cases := []struct {
		name     string
		requests int
		arrivals []arrival
		planGone bool
		// workerBundles sends the answers that arrive together in one
		// bundle, as a worker does, rather than one signal each.
		workerBundles bool
		bundles       []int // sizes of the bundles passed on, in order
	}{
		{name: "all at once", requests: 250, arrivals: at(0, 0, 250), bundles: []int{250}},
		{name: "a bundle's worth, then the rest later", requests: 150,
			arrivals: append(at(0, 0, 100), at(time.Minute, 100, 150)...), bundles: []int{100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 40}},
		{name: "a few, then the last after a while", requests: 4,
			arrivals: append(at(0, 0, 3), arrival{at: time.Minute, request: 3}), bundles: []int{3, 1}},
		{name: "repeats and strangers are dropped", requests: 3,
			arrivals: []arrival{{request: 0}, {request: 0}, {request: -1}, {at: time.Minute, request: 1}, {at: time.Minute, request: 1}, {at: 2 * time.Minute, request: 2}},
			bundles:  []int{1, 1, 1}},
		{name: "the plan is gone", requests: 3, arrivals: at(0, 0, 3), planGone: true},
		{name: "workers' bundles", requests: 150, workerBundles: true,
			arrivals: append(at(0, 0, 60), at(time.Minute, 60, 150)...), bundles: []int{60, 1, 1, 1, 1, 1, 1, 1, 1, 1, 81}},
		{name: "workers' bundles with repeats and strangers", requests: 3, workerBundles: true,
			arrivals: []arrival{{request: 0}, {request: 0}, {request: -1}, {at: time.Minute, request: 1}, {at: time.Minute, request: 2}},
			bundles:  []int{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := quietSuite().NewTestWorkflowEnvironment()
			env.RegisterWorkflow(Relay)
			var mu sync.Mutex
			var bundles []int
			passed := map[string]int{}
			env.OnSignalExternalWorkflow(mock.Anything, "plan/host/c", "", meshapi.SignalPushResults, mock.Anything).Return(
				func(_, _, _, _ string, arg any) error {
					if c.planGone {
						return errors.New("workflow not found")
					}
					mu.Lock()
					defer mu.Unlock()
					b := arg.(meshapi.PushResults)
					bundles = append(bundles, len(b.Results))
					for _, r := range b.Results {
						passed[r.Request]++
					}
					return nil
				})
			in := meshapi.RelayInput{Plan: "plan/host/c"}
			id := func(i int) string { return meshapi.RequestID(in.Plan, fmt.Sprintf("m%d", i)) }
			for i := range c.requests {
				in.Requests = append(in.Requests, id(i))
			}
			byTime := map[time.Duration][]int{}
			var times []time.Duration
			for _, a := range c.arrivals {
				if _, ok := byTime[a.at]; !ok {
					times = append(times, a.at)
				}
				byTime[a.at] = append(byTime[a.at], a.request)
			}
			for _, when := range times {
				env.RegisterDelayedCallback(func() {
					var together meshapi.PushResults
					for _, i := range byTime[when] {
						r := meshapi.PushResult{Request: id(i), Plan: in.Plan, Outcome: meshapi.MachineConverged}
						if i < 0 {
							r.Request = "someone else's"
						}
						if c.workerBundles {
							together.Results = append(together.Results, r)
							continue
						}
						env.SignalWorkflow(meshapi.SignalPushResult, r)
					}
					if c.workerBundles {
						env.SignalWorkflow(meshapi.SignalPushResults, together)
					}
				}, when)
			}
			env.ExecuteWorkflow(Relay, in)
			require.True(t, env.IsWorkflowCompleted())
			var res meshapi.RelayResult
			require.NoError(t, env.GetWorkflowResult(&res))
			assert.Equal(t, c.bundles, bundles, "bundle sizes")
			assert.Equal(t, len(c.bundles), res.Bundles)
			if c.planGone {
				assert.Zero(t, res.Answers)
				return
			}
			assert.Equal(t, c.requests, res.Answers)
			for i := range c.requests {
				assert.Equal(t, 1, passed[id(i)], "request %d passed on once", i)
			}
			assert.LessOrEqual(t, len(bundles), meshapi.RelayedSignals(c.requests), "within what the plan's budget counts")
		})
	}
}
