package testsuite

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// analysisMesh is tier 1 (edge-1, edge-2) waiting on error-rate, and tier
// 2 (control-node) after it, every machine running the host module as a
// requestsServer build on real host agents (exec runtime), scraped by a
// real Prometheus while callers send it requests.
func analysisMesh(t *testing.T, interval string, count, failureLimit int) (*stack, *promServer, *fleetTraffic) {
	prom := startPrometheus(t)
	o := execHostMesh(hostFleet(2))
	o.health = requestsServerHealth
	o.tiers = "{1: {analysis: [error-rate]}}"
	// The first measurement waits for the new build's series to have a
	// rate over 10 s (Prometheus scrapes every second).
	o.analysis = errorRateAnalysis(prom, interval, count, failureLimit, "initial_delay: 8s")
	s := newStack(t, o)
	return s, prom, s.startTraffic(prom, "host")
}

// A good build converges with its measurements in plan show; a build that
// answers 500 to 3 requests in 10, and passes its probe, is stopped by the
// analysis after tier 1: tier 1 is put back on the good build through its
// machine workflows (journalled by each host as a rollback naming the
// check), the bad build is rejected, and tier 2 is never told anything.
func TestAnalysisStopsABadBuildAfterItsFirstTier(t *testing.T) {
	t.Parallel()
	s, _, _ := analysisMesh(t, "2s", 3, 0)

	good := s.commitSource("host", requestsServer("host good", 0))
	id := s.start("host", good).ID
	st := s.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	goodBuild := s.build("host", good)
	checks := st.Tiers[0].Analysis
	require.Len(t, checks, 1)
	require.Equal(t, meshapi.AnalysisPassed, checks[0].Verdict, checks[0].Summary())
	// A measurement taken before Prometheus scraped the new build (a slow
	// box) is "no data": it counts neither way, so it may come first.
	passed, failed, _ := checks[0].Tally()
	require.Equal(t, []int{3, 0}, []int{passed, failed}, "count 3 judged, none failed: %s", checks[0].Summary())
	for _, m := range checks[0].Measurements {
		if m.Error == "" {
			require.Equal(t, 0.0, m.Value, "a good build answers no 5xx")
		}
	}
	require.Empty(t, st.Tiers[1].Analysis, "tier 2 names no check")
	out, err := s.starter("plan", "show", id)
	require.NoError(t, err, out)
	t.Logf("plan show of the good build:\n%s", out)
	require.Contains(t, out, "error-rate passed")

	before := map[string]int{}
	for m, h := range s.hosts {
		before[m] = len(h.Applied())
	}
	bad := s.commitSource("host", requestsServer("host bad", 0.3))
	id = s.start("host", bad).ID
	st = s.wait(id)
	t.Logf("the plan's words: %s: %s", st.State, st.Reason)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	badBuild := s.build("host", bad)
	require.Contains(t, st.Reason, "tier 1 failed its analysis: error-rate: 1 of 1 measurement failed, more than the 0 allowed: result < 0.05 was false on 0.")
	require.Contains(t, st.Reason, fmt.Sprintf("edge-1, edge-2 put back on generation %d", goodBuild.Generation))
	require.Contains(t, st.Reason, "later tiers untouched")
	c := st.Tiers[0].Analysis[0]
	require.Equal(t, meshapi.AnalysisFailed, c.Verdict)
	require.NotEmpty(t, c.Measurements)
	last := c.Measurements[len(c.Measurements)-1]
	require.False(t, last.Passed)
	require.Greater(t, last.Value, 0.05, "3 of 10 requests fail")
	for _, m := range []string{"edge-1", "edge-2"} {
		require.Equal(t, meshapi.MachineReverted, machineOf(st, m).State)
		s.runs(m, goodBuild)
		applied := s.hosts[m].Applied()
		require.Len(t, applied, before[m]+2, "%s: the bad build, then the put-back", m)
		back := applied[len(applied)-1]
		require.True(t, back.Rollback, "journalled as a rollback")
		require.True(t, back.Revert, "and as a put-back after the plan's build failed here")
		require.Equal(t, id, back.Plan, "naming the plan")
		require.Contains(t, back.Reason, "error-rate", "and the check")
		s.checkJournal(m)
		// status reads the failed plan as the one that put the machine
		// back, not as the one that brought what runs.
		sj, err := s.status("--machine", m)
		require.NoError(t, err)
		row := sj.byKey()[m+"/host"]
		require.Equal(t, goodBuild.Generation, *row.Generation)
		require.True(t, row.PutBack, "%s: status marks the put-back: %+v", m, row)
	}
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State)
	require.Len(t, s.hosts["control-node"].Applied(), before["control-node"], "tier 2 was told nothing")
	s.runs("control-node", goodBuild)
	_, rejected, err := s.cat.Rejected(context.Background(), badBuild.Digest)
	require.NoError(t, err)
	require.True(t, rejected, "the bad build is never sent again")

	out, err = s.starter("plan", "show", id)
	require.NoError(t, err, out)
	t.Logf("plan show of the bad build:\n%s", out)
	require.Contains(t, out, "error-rate failed")
	require.Contains(t, out, "reverted")
}

// Prometheus stopped during an analysis: the check cannot be measured, and
// after ErrorLimit tries in a row the plan waits at a gate naming the
// provider; approved, it goes on, the check journalled as passed by who.
func TestAnalysisWithPrometheusDownWaitsForAPerson(t *testing.T) {
	t.Parallel()
	s, prom, _ := analysisMesh(t, "1s", 6, 0)
	s.converge("host", s.commitSource("host", requestsServer("host good", 0)))

	id := s.start("host", s.commitSource("host", requestsServer("host next", 0))).ID
	measuredOnce := func(st meshapi.PlanState) bool {
		return len(st.Tiers) > 0 && len(st.Tiers[0].Analysis) > 0 && len(st.Tiers[0].Analysis[0].Measurements) > 0
	}
	waitUntil(t, s, id, "a first measurement", measuredOnce)
	prom.Stop()
	st := waitFor(t, s, id, meshapi.PlanGated)
	c := st.Tiers[0].Analysis[0]
	require.Equal(t, meshapi.AnalysisInconclusive, c.Verdict, c.Summary())
	require.Contains(t, c.Reason, prom.Address(), "naming the provider")
	require.Equal(t, meshapi.TierAnalysing, st.Tiers[0].State)
	require.Equal(t, meshapi.TierWaiting, st.Tiers[1].State, "tier 2 waits")

	out, err := s.starter("plan", "show", id)
	require.NoError(t, err, out)
	t.Logf("plan show at the gate:\n%s", out)
	require.Contains(t, out, "inconclusive")
	require.Contains(t, out, "plan approve "+id)

	out, err = s.starter("plan", "approve", id, "--by", "carol")
	require.NoError(t, err, out)
	st = s.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	c = st.Tiers[0].Analysis[0]
	require.Equal(t, meshapi.AnalysisApproved, c.Verdict)
	require.Contains(t, c.Reason, "passed by carol")
}

// The worker SIGKILLed during an analysis: a new worker resumes the check
// with the measurements already taken and reaches the verdict the series
// decides. The provider answers one bad measurement, then good ones; the
// check passes at its fourth, one failure tolerated. A check that lost its
// first two measurements would need two more from the provider than the
// four it asks for, and would not keep their times.
func TestAnalysisResumesAfterTheWorkerIsKilled(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		v := "0.0"
		if served == 0 {
			v = "0.9"
		}
		served++
		mu.Unlock()
		fmt.Fprintf(w, `{"error_rate": %s}`, v)
	}))
	defer srv.Close()

	o := exampleMesh()
	o.tiers = "{1: {analysis: [error-rate]}}"
	o.analysis = fmt.Sprintf(`{providers: {status: {web: {url: "%s/{{.Module}}", json_path: "$.error_rate"}}},
  checks: {error-rate: {provider: status, success: "result < 0.5", interval: 1s, count: 4, failure_limit: 1}}}`, srv.URL)
	fs := newStack(t, withFaults(o))
	fs.workers.start()

	id := fs.start("host", fs.commit("host")).ID
	var before []meshapi.Measurement
	waitUntil(t, fs, id, "two measurements", func(st meshapi.PlanState) bool {
		if len(st.Tiers) == 0 || len(st.Tiers[0].Analysis) == 0 || len(st.Tiers[0].Analysis[0].Measurements) < 2 {
			return false
		}
		before = st.Tiers[0].Analysis[0].Measurements
		return true
	})
	fs.workers.kill()
	mu.Lock()
	servedAtKill := served
	mu.Unlock()
	t.Logf("worker killed after %d measurements in the plan's state (%d served)", len(before), servedAtKill)
	fs.workers.start()
	st := fs.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	c := st.Tiers[0].Analysis[0]
	require.Equal(t, meshapi.AnalysisPassed, c.Verdict, c.Summary())
	require.Len(t, c.Measurements, 4, "the count, no more: %s", c.Summary())
	for i, m := range before[:2] {
		require.True(t, m.At.Equal(c.Measurements[i].At), "measurement %d kept across the kill", i+1)
	}
	passed, failed, _ := c.Tally()
	require.Equal(t, []int{3, 1}, []int{passed, failed})
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, served, servedAtKill+2, "the new worker took only the measurements left (one in flight at the kill may be taken again)")
}

// machineOf is a machine's progress in a plan's state.
func machineOf(st meshapi.PlanState, machine string) meshapi.MachineProgress {
	m, _ := st.Machine(machine)
	return m
}
