package workflows

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// budgetHarness runs the fleet budget in the SDK's test environment and
// records every grant and wait it signals, at the environment's clock.
type budgetHarness struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	start time.Time
	mu    sync.Mutex
	sent  []sentGrant
	// gone are machines whose workflow does not run: a signal to them
	// fails.
	gone map[string]bool
}

// sentGrant is one LeaseGrant signalled to a machine workflow, and when.
type sentGrant struct {
	machine string
	at      time.Duration
	grant   meshapi.LeaseGrant
}

func newBudgetHarness(t *testing.T) *budgetHarness { return newBudgetHarnessOn(t, quietSuite()) }

// newBudgetHarnessOn is newBudgetHarness in a suite of the test's.
func newBudgetHarnessOn(t *testing.T, s *testsuite.WorkflowTestSuite) *budgetHarness {
	h := &budgetHarness{t: t, env: s.NewTestWorkflowEnvironment(), gone: map[string]bool{}}
	h.env.RegisterWorkflowWithOptions(FleetBudget, workflow.RegisterOptions{Name: meshapi.FleetBudgetWorkflowType})
	h.start = h.env.Now()
	h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", meshapi.SignalLeaseGrant, mock.Anything).Return(
		func(_, id, _, _ string, arg any) error {
			machine, _ := meshapi.MachineFromID(id)
			h.mu.Lock()
			defer h.mu.Unlock()
			h.sent = append(h.sent, sentGrant{machine: machine, at: h.env.Now().Sub(h.start), grant: arg.(meshapi.LeaseGrant)})
			if h.gone[machine] {
				return errors.New("workflow not found")
			}
			return nil
		})
	return h
}

// one is budget max_unavailable 1.
var one = meshapi.FleetBudget{MaxUnavailable: 1, FleetSize: 4}

// ask is machine's ask for a push of module, held at most an hour.
func ask(machine, module string, b meshapi.FleetBudget) meshapi.LeaseAsk {
	return meshapi.LeaseAsk{Machine: machine, Request: "plan/" + module + "/c@" + machine, Plan: "plan/" + module + "/c", Module: module, Budget: b, Hold: time.Hour}
}

func (h *budgetHarness) askAt(d time.Duration, a meshapi.LeaseAsk) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(meshapi.SignalLeaseAsk, a) }, d)
}

func (h *budgetHarness) releaseAt(d time.Duration, a meshapi.LeaseAsk) {
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(meshapi.SignalLeaseRelease, meshapi.LeaseRelease{Machine: a.Machine, Request: a.Request})
	}, d)
}

// run runs the budget until it continues as new after signals signals,
// and returns what it continued with.
func (h *budgetHarness) run(signals int) meshapi.FleetBudgetInput {
	h.t.Helper()
	h.env.ExecuteWorkflow(FleetBudget, meshapi.FleetBudgetInput{SignalBudget: signals})
	require.True(h.t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(h.t, h.env.GetWorkflowError(), &can, "the budget ends only by continuing as new")
	var next meshapi.FleetBudgetInput
	require.NoError(h.t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

// grantedAt is a grant as the tests compare it: which machine, when.
type grantedAt struct {
	machine string
	at      time.Duration
}

// granted is when each machine was granted, in order of time (by name
// among grants at one moment, whose signals the environment may deliver
// in any order).
func (h *budgetHarness) granted() []grantedAt {
	var out []grantedAt
	for _, s := range h.sent {
		if s.grant.Granted {
			out = append(out, grantedAt{machine: s.machine, at: s.at})
		}
	}
	slices.SortStableFunc(out, func(a, b grantedAt) int {
		return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.machine, b.machine))
	})
	return out
}

// words are the wait words machine was sent.
func (h *budgetHarness) words(machine string) []string {
	var out []string
	for _, s := range h.sent {
		if s.machine == machine && !s.grant.Granted {
			out = append(out, s.grant.Words)
		}
	}
	return out
}

// With max_unavailable 1, a second machine waits, told behind whom, until
// the first releases; a rollback asked later goes before the merge push
// waiting.
func TestFleetBudgetGrantsOneAtATimeRollbacksFirst(t *testing.T) {
	h := newBudgetHarness(t)
	a, b, c := ask("edge-1", "host", one), ask("edge-2", "web", one), ask("edge-3", "host", one)
	c.Urgent = true
	h.askAt(0, a)
	h.askAt(time.Minute, b)
	h.askAt(2*time.Minute, c)
	h.releaseAt(3*time.Minute, a)
	h.releaseAt(4*time.Minute, c)
	h.releaseAt(5*time.Minute, b)
	next := h.run(6)

	require.Equal(t, []grantedAt{{"edge-1", 0}, {"edge-3", 3 * time.Minute}, {"edge-2", 4 * time.Minute}}, h.granted(),
		"one at a time, each when the one before released; the rollback before the merge push that waited longer")
	require.Equal(t, []string{"waiting for the fleet budget: 1 of 1 unavailable (edge-1 pushing host)"}, h.words("edge-2"))
	require.Equal(t, []string{"waiting for the fleet budget: 1 of 1 unavailable (edge-1 pushing host)"}, h.words("edge-3"),
		"the rollback goes first in line")
	require.Empty(t, next.Leases, "every lease released")
	require.Empty(t, next.Waiting)
}

// A machine that asks again (a retried ask, a restarted machine workflow)
// is granted the lease it holds, not a second place.
func TestFleetBudgetReAskIsIdempotent(t *testing.T) {
	h := newBudgetHarness(t)
	a, b := ask("edge-1", "host", one), ask("edge-2", "web", one)
	h.askAt(0, a)
	h.askAt(time.Minute, a)
	h.askAt(2*time.Minute, b)
	h.askAt(3*time.Minute, b)
	h.releaseAt(4*time.Minute, a)
	next := h.run(5)

	require.Equal(t, []grantedAt{{"edge-1", 0}, {"edge-1", time.Minute}, {"edge-2", 4 * time.Minute}}, h.granted(),
		"edge-1's second ask is granted its own lease again; edge-2 waits for its release, once in line")
	require.Len(t, next.Leases, 1)
	require.Equal(t, "edge-2", next.Leases[0].Machine)
	require.Empty(t, next.Waiting)
}

// Leases do not leak: one never released lapses after its Hold, and one
// granted to a machine workflow that no longer runs is dropped at once.
func TestFleetBudgetLeasesDoNotLeak(t *testing.T) {
	t.Run("held past its hold", func(t *testing.T) {
		h := newBudgetHarness(t)
		a, b := ask("edge-1", "host", one), ask("edge-2", "web", one)
		a.Hold = 10 * time.Minute
		h.askAt(0, a)
		h.askAt(time.Minute, b)
		h.releaseAt(30*time.Minute, b)
		next := h.run(3)
		require.Equal(t, []grantedAt{{"edge-1", 0}, {"edge-2", 10 * time.Minute}}, h.granted(), "edge-1's lease lapsed at its hold")
		require.Empty(t, next.Leases)
	})
	t.Run("its machine workflow is gone", func(t *testing.T) {
		h := newBudgetHarness(t)
		h.gone["edge-1"] = true
		a, b := ask("edge-1", "host", one), ask("edge-2", "web", one)
		h.askAt(0, a)
		h.askAt(0, b)
		h.releaseAt(time.Minute, b)
		next := h.run(3)
		require.Equal(t, []grantedAt{{"edge-1", 0}, {"edge-2", 0}}, h.granted(), "edge-1's grant could not be delivered: its place went to edge-2")
		require.Empty(t, next.Leases)
	})
}

// A percentage is of the fleet's size, rounded down, and never below one.
func TestFleetBudgetPercentOfFleet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget meshapi.FleetBudget
		want   []grantedAt
	}{
		{"50% of 4 is 2", meshapi.FleetBudget{MaxUnavailable: 50, Percent: true, FleetSize: 4},
			[]grantedAt{{"edge-1", 0}, {"edge-2", 0}, {"edge-3", time.Minute}}},
		{"10% of 4 is still 1", meshapi.FleetBudget{MaxUnavailable: 10, Percent: true, FleetSize: 4},
			[]grantedAt{{"edge-1", 0}, {"edge-2", time.Minute}, {"edge-3", 2 * time.Minute}}},
		{"a count of 3", meshapi.FleetBudget{MaxUnavailable: 3, FleetSize: 4},
			[]grantedAt{{"edge-1", 0}, {"edge-2", 0}, {"edge-3", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newBudgetHarness(t)
			as := []meshapi.LeaseAsk{ask("edge-1", "host", tc.budget), ask("edge-2", "host", tc.budget), ask("edge-3", "host", tc.budget)}
			for _, a := range as {
				h.askAt(0, a)
			}
			for i, a := range as {
				h.releaseAt(time.Duration(i+1)*time.Minute, a)
			}
			h.run(6)
			require.Equal(t, tc.want, h.granted())
		})
	}
}

// Continuing as new loses no ask and no lease: asks delivered with the one
// that reached the run's signal budget are taken into the line first.
func TestFleetBudgetContinuesAsNewWithItsLeasesAndLine(t *testing.T) {
	h := newBudgetHarness(t)
	a, b, c := ask("edge-1", "host", one), ask("edge-2", "web", one), ask("edge-3", "host", one)
	h.env.RegisterDelayedCallback(func() {
		for _, x := range []meshapi.LeaseAsk{a, b, c} {
			h.env.SignalWorkflow(meshapi.SignalLeaseAsk, x)
		}
	}, time.Minute)
	next := h.run(2)

	require.Len(t, next.Leases, 1)
	require.Equal(t, "edge-1", next.Leases[0].Machine)
	require.Equal(t, []meshapi.LeaseAsk{b, c}, next.Waiting, "the ask past the signal budget is in the line it continues with")
	require.Equal(t, one, next.Budget)
	require.Equal(t, 2, next.SignalBudget)
	require.Equal(t, []string{"waiting for the fleet budget: 1 of 1 unavailable (edge-1 pushing host), 1 ahead in line"}, h.words("edge-3"),
		"edge-3 is told edge-2 is ahead of it")
}

// gauges is a metrics handler that keeps each gauge's last value, by name
// (tags dropped); counters and timers go nowhere.
type gauges struct {
	client.MetricsHandler
	mu   *sync.Mutex
	last map[string]float64
}

func newGauges() gauges {
	return gauges{MetricsHandler: client.MetricsNopHandler, mu: &sync.Mutex{}, last: map[string]float64{}}
}

func (g gauges) WithTags(map[string]string) client.MetricsHandler { return g }

func (g gauges) Gauge(name string) client.MetricsGauge {
	return gaugeFunc(func(v float64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.last[name] = v
	})
}

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

// now is the budget's two gauges: leases held, machines waiting.
func (g gauges) now() [2]float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return [2]float64{g.last[MetricFleetUnavailable], g.last[MetricFleetWaiting]}
}

// The fleet budget's gauges say how many machines it counts unavailable
// and how many wait, as leases are granted and released.
func TestFleetBudgetGauges(t *testing.T) {
	g := newGauges()
	s := quietSuite()
	s.SetMetricsHandler(g)
	h := newBudgetHarnessOn(t, s)
	a, b := ask("edge-1", "host", one), ask("edge-2", "web", one)
	h.askAt(0, a)
	h.askAt(time.Minute, b)
	h.releaseAt(3*time.Minute, a)
	h.releaseAt(5*time.Minute, b)
	seen := map[time.Duration][2]float64{}
	for _, at := range []time.Duration{2 * time.Minute, 4 * time.Minute} {
		h.env.RegisterDelayedCallback(func() { seen[at] = g.now() }, at)
	}
	h.run(4)
	require.Equal(t, map[time.Duration][2]float64{
		2 * time.Minute: {1, 1}, // edge-1 holds the one place, edge-2 waits
		4 * time.Minute: {1, 0}, // edge-2 holds it
	}, seen)
	require.Equal(t, [2]float64{0, 0}, g.now(), "both released")
}
