package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// analysisHarness is a plan harness whose tier 1 (e1, e2) names checks
// and whose tier 2 (cp) follows; the fake Analyse answers each check with
// its verdict, signalling each measurement first as the real one does.
type analysisHarness struct {
	*planHarness
	mu        sync.Mutex
	analysed  []meshapi.AnalyseInput
	rollbacks []meshapi.RollbackTargetInput
}

// measured is one fake measurement of value v.
func measured(at time.Time, v float64, passed bool) meshapi.Measurement {
	return meshapi.Measurement{At: at, Value: v, Passed: passed}
}

func newAnalysisHarness(t *testing.T, checks []string, bake time.Duration, verdicts map[string]meshapi.AnalysisCheck, delay map[string]time.Duration) *analysisHarness {
	h := &analysisHarness{planHarness: newPlanHarness(t, targets(tier(1, "e1", "e2"), tier(2, "cp"))...)}
	h.withPolicies(meshapi.TierPolicy{Tier: 1, Bake: bake, Analysis: checks}, meshapi.TierPolicy{Tier: 2})
	h.env.OnActivity(acts.Bake, mock.Anything, mock.Anything).Return(func(_ context.Context, in meshapi.BakeInput) (meshapi.BakeResult, error) {
		return meshapi.BakeResult{Machines: len(in.Machines)}, nil
	}).After(bake)
	for _, name := range checks {
		c := verdicts[name]
		h.env.OnActivity(acts.Analyse, mock.Anything, mock.MatchedBy(func(in meshapi.AnalyseInput) bool { return in.Check == name })).Return(
			func(_ context.Context, in meshapi.AnalyseInput) (meshapi.AnalyseResult, error) {
				h.mu.Lock()
				h.analysed = append(h.analysed, in)
				h.mu.Unlock()
				first := c
				first.Measurements, first.Verdict = nil, meshapi.AnalysisRunning
				for _, m := range c.Measurements {
					h.env.SignalWorkflow(meshapi.SignalMeasured, meshapi.Measured{Tier: in.Tier, Check: first, Measurement: m})
				}
				return meshapi.AnalyseResult{Check: c}, nil
			}).After(delay[name])
	}
	h.env.OnActivity(acts.RollbackTarget, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in meshapi.RollbackTargetInput) (meshapi.RollbackTargetResult, error) {
			h.mu.Lock()
			h.rollbacks = append(h.rollbacks, in)
			h.mu.Unlock()
			return meshapi.RollbackTargetResult{Build: prevBuild, Machines: in.Machines, From: []mesh.Build{*in.From}}, nil
		})
	h.outcome = func(string) *meshapi.PushResult {
		return &meshapi.PushResult{Outcome: meshapi.MachineConverged, Seq: 1}
	}
	return h
}

// prevBuild is what a put-back returns the tier to.
var prevBuild = mesh.Build{Module: "host", Commit: strings.Repeat("6", 40), Digest: "sha256:" + strings.Repeat("6", 64), Generation: 6}

func check(name string, verdict meshapi.Verdict, dryRun bool, values ...float64) meshapi.AnalysisCheck {
	c := meshapi.AnalysisCheck{Check: name, Provider: "prom", Success: "result < 0.5", Count: len(values), Verdict: verdict, DryRun: dryRun}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i, v := range values {
		c.Measurements = append(c.Measurements, measured(at.Add(time.Duration(i)*time.Minute), v, v < 0.5))
	}
	return c
}

func TestPlanAnalysis(t *testing.T) {
	for _, tc := range []struct {
		name     string
		checks   map[string]meshapi.AnalysisCheck
		delay    map[string]time.Duration
		state    meshapi.PlanStatus
		reason   []string // substrings of the plan's reason
		verdicts map[string]meshapi.Verdict
		putBack  bool
	}{
		{
			name:     "checks that pass let the next tier start",
			checks:   map[string]meshapi.AnalysisCheck{"error-rate": check("error-rate", meshapi.AnalysisPassed, false, 0.01, 0.02, 0.0)},
			state:    meshapi.PlanConverged,
			verdicts: map[string]meshapi.Verdict{"error-rate": meshapi.AnalysisPassed},
		},
		{
			name:     "a failed check halts the plan and puts the tier back",
			checks:   map[string]meshapi.AnalysisCheck{"error-rate": check("error-rate", meshapi.AnalysisFailed, false, 0.01, 0.7)},
			state:    meshapi.PlanHalted,
			reason:   []string{"tier 1 failed its analysis: error-rate", "e1, e2 put back on generation 6", "generation 7 rejected", "later tiers untouched"},
			verdicts: map[string]meshapi.Verdict{"error-rate": meshapi.AnalysisFailed},
			putBack:  true,
		},
		{
			name:     "a failed dry run is reported and the plan goes on",
			checks:   map[string]meshapi.AnalysisCheck{"error-rate": check("error-rate", meshapi.AnalysisFailed, true, 0.7)},
			state:    meshapi.PlanConverged,
			verdicts: map[string]meshapi.Verdict{"error-rate": meshapi.AnalysisFailed},
		},
		{
			name:     "an inconclusive dry run is reported and the plan goes on",
			checks:   map[string]meshapi.AnalysisCheck{"error-rate": check("error-rate", meshapi.AnalysisInconclusive, true)},
			state:    meshapi.PlanConverged,
			verdicts: map[string]meshapi.Verdict{"error-rate": meshapi.AnalysisInconclusive},
		},
		{
			name: "a failed check stops the others",
			checks: map[string]meshapi.AnalysisCheck{
				"error-rate": check("error-rate", meshapi.AnalysisFailed, false, 0.9),
				"latency":    check("latency", meshapi.AnalysisPassed, false, 0.1),
			},
			delay:    map[string]time.Duration{"latency": time.Hour},
			state:    meshapi.PlanHalted,
			reason:   []string{"analysis: error-rate"},
			verdicts: map[string]meshapi.Verdict{"error-rate": meshapi.AnalysisFailed, "latency": meshapi.AnalysisCancelled},
			putBack:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for _, n := range []string{"error-rate", "latency"} {
				if _, ok := tc.checks[n]; ok {
					names = append(names, n)
				}
			}
			h := newAnalysisHarness(t, names, 0, tc.checks, tc.delay)
			st := h.run(meshapi.PlanInput{})
			require.Equal(t, tc.state, st.State, st.Reason)
			for _, r := range tc.reason {
				require.Contains(t, st.Reason, r)
			}
			t1 := st.Tiers[0]
			require.Len(t, t1.Analysis, len(names))
			for _, c := range t1.Analysis {
				require.Equal(t, tc.verdicts[c.Check], c.Verdict, c.Check)
				if c.Verdict != meshapi.AnalysisCancelled {
					require.Len(t, c.Measurements, len(tc.checks[c.Check].Measurements), "every measurement in the plan's state")
				}
			}
			for _, in := range h.analysed {
				require.Equal(t, []string{"e1", "e2"}, in.Machines, "the tier's machines that took the build")
				require.Equal(t, 1, in.Tier)
			}
			if !tc.putBack {
				require.Empty(t, h.rollbacks)
				require.Equal(t, meshapi.TierConverged, st.Tiers[1].State)
				return
			}
			require.Len(t, h.rollbacks, 1)
			require.Equal(t, []string{"e1", "e2"}, h.rollbacks[0].Machines)
			require.Equal(t, int64(7), h.rollbacks[0].From.Generation, "only the plan's build is put back")
			require.Len(t, h.enqueued, 2, "tier 1's push, then its put-back; tier 2 never handed out")
			require.Equal(t, []string{"e1", "e2"}, h.enqueued[1])
			for _, m := range []string{"e1", "e2"} {
				require.Equal(t, meshapi.MachineReverted, machineState(st, m).State)
			}
			require.Equal(t, meshapi.TierHalted, t1.State)
			require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State)
			require.Equal(t, meshapi.MachineSkipped, machineState(st, "cp").State)
		})
	}
}

// The put-back is a rollback of the one build, through the machine
// workflows: each request names the build it goes back to, the build it
// comes from (so that a machine a newer build reached is left alone), and
// who asked and why, for the host's journal.
func TestPlanPutBackRequests(t *testing.T) {
	h := newAnalysisHarness(t, []string{"error-rate"}, 0,
		map[string]meshapi.AnalysisCheck{"error-rate": check("error-rate", meshapi.AnalysisFailed, false, 0.8)}, nil)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	reqs := h.requests
	require.Len(t, reqs, 4, "two pushes, two put-backs")
	for _, r := range reqs[2:] {
		require.Equal(t, meshapi.PutBackID(st.Plan, r.Machine), r.Request)
		require.Equal(t, prevBuild, r.Build)
		require.Equal(t, int64(7), r.From.Generation)
		require.NotNil(t, r.Rollback)
		require.Equal(t, analyseBy, r.Rollback.By)
		require.Contains(t, r.Rollback.Reason, "analysis: error-rate")
		c, _ := r.Declaration.Container("host")
		require.Equal(t, prevBuild.Digest, c.Digest)
	}
}

// An inconclusive check holds the plan at a gate until a person approves
// it (journalled with who) or aborts the plan.
func TestPlanInconclusiveAnalysisWaitsForAPerson(t *testing.T) {
	inconclusive := check("error-rate", meshapi.AnalysisInconclusive, false)
	inconclusive.Reason = "prom could not be measured 4 times in a row: connection refused"
	for _, tc := range []struct {
		name  string
		act   string
		arg   any
		state meshapi.PlanStatus
	}{
		{"approved, it goes on", meshapi.UpdateApprove, meshapi.ApproveInput{By: "alice"}, meshapi.PlanConverged},
		{"approved naming the tier, it goes on", meshapi.UpdateApprove, meshapi.ApproveInput{By: "alice", Tier: ptr(1)}, meshapi.PlanConverged},
		{"aborted, it ends", meshapi.UpdateAbort, meshapi.AbortInput{By: "bob", Reason: "prometheus is gone"}, meshapi.PlanAborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newAnalysisHarness(t, []string{"error-rate"}, 0, map[string]meshapi.AnalysisCheck{"error-rate": inconclusive}, nil)
			var atGate meshapi.PlanState
			var res *updateResult
			handed := 0
			h.env.RegisterDelayedCallback(func() {
				atGate, handed = h.query(), len(h.enqueued)
				res = h.update(tc.act, tc.arg)
			}, time.Hour)
			st := h.run(meshapi.PlanInput{})
			res.ok(t)
			require.Equal(t, meshapi.PlanGated, atGate.State, "the plan waits at a gate")
			require.Equal(t, meshapi.AnalysisInconclusive, atGate.Tiers[0].Analysis[0].Verdict)
			require.Equal(t, 1, handed, "tier 2 waits")
			require.Equal(t, tc.state, st.State, st.Reason)
			if tc.state == meshapi.PlanConverged {
				c := st.Tiers[0].Analysis[0]
				require.Equal(t, meshapi.AnalysisApproved, c.Verdict)
				require.Contains(t, c.Reason, "connection refused")
				require.Contains(t, c.Reason, "passed by alice")
			}
		})
	}
}

// A bake and a check run together; the tier goes on when both are done.
func TestPlanAnalysisAlongsideTheBake(t *testing.T) {
	h := newAnalysisHarness(t, []string{"error-rate"}, 10*time.Minute,
		map[string]meshapi.AnalysisCheck{"error-rate": check("error-rate", meshapi.AnalysisPassed, false, 0.1)},
		map[string]time.Duration{"error-rate": 2 * time.Minute})
	during, details := h.snapshotAt(5 * time.Minute)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Equal(t, meshapi.TierAnalysing, during.Tiers[0].State, "the check passed; the bake still runs")
	require.NotNil(t, during.Tiers[0].BakeUntil)
	require.Equal(t, meshapi.AnalysisPassed, during.Tiers[0].Analysis[0].Verdict)
	require.Len(t, h.enqueued, 2)
	require.Contains(t, *details, "- tier 1: analysing (until ", "the Web UI's current details")
	require.Contains(t, *details, "  - analysis error-rate passed: 1 of 1 measured")
	require.Contains(t, *details, "    - 12:00:00 0.1 passed", "and each measurement")
}

// A check waiting out its initial delay says so, with what it will ask and
// when it starts measuring, in the plan's state and the Web UI's details;
// before its announcement it is waiting too, never "running 0 of 0".
func TestPlanAnalysisWaitsOutItsInitialDelay(t *testing.T) {
	c := check("error-rate", meshapi.AnalysisPassed, false)
	c.Count, c.FailureLimit = 10, 1
	h := newAnalysisHarness(t, []string{"error-rate"}, 0, map[string]meshapi.AnalysisCheck{"error-rate": c},
		map[string]time.Duration{"error-rate": 10 * time.Minute})
	due := time.Date(2026, 12, 3, 12, 5, 0, 0, time.UTC)
	waiting := c
	waiting.Verdict, waiting.FirstDue = meshapi.AnalysisWaiting, &due
	// The Analyse activity announces the check as it starts (the fake's
	// own signals come with its result, at ten minutes).
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(meshapi.SignalAnalysisStarted, meshapi.AnalysisStarted{Tier: 1, Check: waiting})
	}, time.Minute)
	during, details := h.snapshotAt(5 * time.Minute)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	got := during.Tiers[0].Analysis[0]
	require.Equal(t, meshapi.AnalysisWaiting, got.Verdict)
	require.Equal(t, 10, got.Count, "what the check asks, before any measurement")
	require.Equal(t, "error-rate waiting until 12:05:00 UTC: 0 of 10 measured, 0 failed of 1 allowed", got.Summary())
	require.Contains(t, *details, "analysis error-rate waiting until 12:05:00 UTC: 0 of 10 measured")
	require.Equal(t, meshapi.AnalysisPassed, st.Tiers[0].Analysis[0].Verdict)
	require.Nil(t, st.Tiers[0].Analysis[0].FirstDue, "the result replaces the announcement")
}

// Before its activity says anything, a check is waiting, not running.
func TestPlanAnalysisWaitingBeforeItsActivitySpeaks(t *testing.T) {
	h := newAnalysisHarness(t, []string{"error-rate"}, 0,
		map[string]meshapi.AnalysisCheck{"error-rate": check("error-rate", meshapi.AnalysisPassed, false)},
		map[string]time.Duration{"error-rate": 10 * time.Minute})
	var during meshapi.PlanState
	h.env.RegisterDelayedCallback(func() { during = h.query() }, 5*time.Minute)
	st := h.run(meshapi.PlanInput{})
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.Equal(t, meshapi.AnalysisWaiting, during.Tiers[0].Analysis[0].Verdict)
}

// snapshotAt takes the plan's state and the Web UI's current details at d
// of the environment's clock; they are filled in once the run gets there.
func (h *analysisHarness) snapshotAt(d time.Duration) (*meshapi.PlanState, *string) {
	st, details := new(meshapi.PlanState), new(string)
	h.env.RegisterDelayedCallback(func() {
		*st = h.query()
		*details = currentDetails(h.t, h.env)
	}, d)
	return st, details
}

func ptr[T any](v T) *T { return &v }
