package activities

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/analysis"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// promScript speaks the Prometheus query API with scripted answers, one
// per query in turn (the last one repeats): a number is a scalar result,
// "down" a 503. The real Prometheus is internal/analysis's test; this one
// is about what the activity does with the answers.
type promScript struct {
	answers []string

	mu      sync.Mutex
	queries []string
}

func (p *promScript) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	i := min(len(p.queries), len(p.answers)-1)
	p.queries = append(p.queries, r.URL.Query().Get("query"))
	p.mu.Unlock()
	if p.answers[i] == "down" {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"` + p.answers[i] + `"]}}`))
}

func (p *promScript) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.queries...)
}

type analysisFixture struct {
	env   *testsuite.TestActivityEnvironment
	acts  *Activities
	plans *fakePlans
	prom  *promScript
	addr  string
	in    meshapi.AnalyseInput
}

// fixtureInterval is the checks' interval unless a case says otherwise. It
// also bounds each measurement (min(interval, MeasureTimeout)), so it is
// long enough that a loaded machine (go test -race beside the integration
// suites) never times a loopback query out, which would desynchronise a
// scripted provider's answers.
const fixtureInterval = 100 * time.Millisecond

// newAnalysisFixture is a worker whose config has check error-rate (ch,
// on provider prom, with fixtureInterval unless ch says otherwise) reading
// a scripted Prometheus, and a tier-1 analysis input for it since now.
func newAnalysisFixture(t *testing.T, ch config.Check, answers ...string) *analysisFixture {
	f := &analysisFixture{plans: &fakePlans{}, prom: &promScript{answers: answers}}
	srv := httptest.NewServer(f.prom)
	t.Cleanup(srv.Close)
	f.addr = srv.URL
	ch.Provider = orDefault(ch.Provider, "prom")
	ch.Query = orDefault(ch.Query, `sum(errors{module="{{.Module}}",generation="{{.Generation}}"})`)
	ch.Success = orDefault(ch.Success, "result < 0.5")
	if ch.Interval == 0 {
		ch.Interval = fixtureInterval
	}
	cfg := &config.Config{Analysis: config.Analysis{
		Providers: map[string]config.Provider{"prom": {Prometheus: &config.Prometheus{Address: srv.URL}}},
		Checks:    map[string]config.Check{"error-rate": ch},
	}}
	var s testsuite.WorkflowTestSuite
	f.env = s.NewTestActivityEnvironment()
	f.acts = &Activities{Mesh: cfg, Plans: f.plans, Log: zerolog.Nop()}
	f.env.RegisterActivity(f.acts)
	f.in = meshapi.AnalyseInput{Plan: "plan/shop/abc", Build: mesh.Build{Module: "shop", Commit: "abc", Generation: 7},
		Tier: 1, Machines: []string{"edge-1", "edge-2"}, Check: "error-rate", Since: time.Now()}
	return f
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (f *analysisFixture) run(t *testing.T) meshapi.AnalysisCheck {
	res, err := execute[meshapi.AnalyseResult](t, f.env, f.acts.Analyse, f.in)
	require.NoError(t, err)
	return res.Check
}

func TestAnalyse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		check   config.Check
		answers []string
		want    meshapi.Verdict
		// measured is the measurements' verdicts in turn.
		measured string
		reason   string
	}{
		{"passes after count good", config.Check{Count: 3}, []string{"0.1"},
			meshapi.AnalysisPassed, "passed passed passed", ""},
		{"tolerates failures up to the limit", config.Check{Count: 3, FailureLimit: 1}, []string{"0.1", "0.62", "0.1"},
			meshapi.AnalysisPassed, "passed failed passed", ""},
		{"fails past the failure limit", config.Check{Count: 5, FailureLimit: 1}, []string{"0.1", "0.62", "0.1", "0.7"},
			meshapi.AnalysisFailed, "passed failed passed failed", "2 of 4 measurements failed, more than the 1 allowed: result < 0.5 was false on 0.7"},
		{"a failed dry run is failed: the plan decides", config.Check{Count: 3, DryRun: true}, []string{"0.9"},
			meshapi.AnalysisFailed, "failed", "1 of 1 measurement failed, more than the 0 allowed: result < 0.5 was false on 0.9"},
		{"errors are not counted as judged", config.Check{Count: 3}, []string{"down", "0.9"},
			meshapi.AnalysisFailed, "error failed", "1 of 1 measurement failed, more than the 0 allowed: result < 0.5 was false on 0.9"},
		{"inconclusive past ErrorLimit errors in a row", config.Check{Count: 3}, []string{"0.1", "down"},
			meshapi.AnalysisInconclusive, "passed" + strings.Repeat(" error", analysis.ErrorLimit+1),
			"could not be measured 5 times in a row: prometheus: HTTP 503: overloaded"},
		{"errors between good measurements are not in a row", config.Check{Count: 3},
			[]string{"down", "down", "down", "down", "0.1", "down", "down", "down", "down", "0.1", "0.1"},
			meshapi.AnalysisPassed, "error error error error passed error error error error passed passed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAnalysisFixture(t, tc.check, tc.answers...)
			got := f.run(t)
			assert.Equal(t, tc.want, got.Verdict)
			var verdicts []string
			for _, m := range got.Measurements {
				verdicts = append(verdicts, m.Verdict())
			}
			assert.Equal(t, tc.measured, strings.Join(verdicts, " "))
			if tc.reason == "" {
				assert.Empty(t, got.Reason)
			} else {
				assert.Contains(t, got.Reason, tc.reason)
			}
			if tc.want == meshapi.AnalysisInconclusive {
				assert.Contains(t, got.Reason, "prom ("+f.addr+")", "names the provider and where it is")
			}
			assert.Len(t, f.prom.asked(), len(got.Measurements), "one query per measurement, none after the verdict")
			assert.Equal(t, tc.check.DryRun, got.DryRun)
		})
	}
}

// Every measurement is signalled to the plan as it is taken, with what the
// check asks (the query as sent) and the verdict running; the result
// carries the same measurements.
func TestAnalyseSignalsEachMeasurement(t *testing.T) {
	f := newAnalysisFixture(t, config.Check{Count: 3, FailureLimit: 1}, "0.1", "0.62", "0.1")
	got := f.run(t)
	require.Equal(t, meshapi.AnalysisPassed, got.Verdict)
	require.Len(t, got.Measurements, 3)
	query := `sum(errors{module="shop",generation="7"})`
	assert.Equal(t, query, got.Query)
	assert.Equal(t, []string{query, query, query}, f.prom.asked())

	signals := f.plans.signals()
	require.Len(t, signals, 3, "one signal per measurement")
	for i, s := range signals {
		assert.Equal(t, "plan/shop/abc", s.plan)
		assert.Equal(t, 1, s.m.Tier)
		assert.Equal(t, meshapi.AnalysisCheck{Check: "error-rate", Provider: "prom", Query: query, Success: "result < 0.5",
			Interval: fixtureInterval, Count: 3, FailureLimit: 1, Verdict: meshapi.AnalysisRunning}, s.m.Check)
		assert.Equal(t, got.Measurements[i], s.m.Measurement)
	}
}

// A retry (the worker killed mid-analysis) restores the measurements from
// its heartbeat and takes only the ones left.
func TestAnalyseResumesFromHeartbeat(t *testing.T) {
	f := newAnalysisFixture(t, config.Check{Count: 4, FailureLimit: 1}, "0.1")
	at := time.Now().UTC().Truncate(time.Millisecond)
	earlier := []meshapi.Measurement{
		{At: at.Add(-3 * time.Second), Value: 0.2, Passed: true},
		{At: at.Add(-2 * time.Second), Value: 0.8},
		{At: at.Add(-time.Second), Error: "prometheus: connection refused"},
	}
	f.env.SetHeartbeatDetails(earlier)
	got := f.run(t)
	assert.Equal(t, meshapi.AnalysisPassed, got.Verdict, "3 good and 1 failed of 1 allowed: 4 judged")
	require.Len(t, f.prom.asked(), 2, "only the measurements left: 2 more judged ones for 4")
	require.Len(t, got.Measurements, 5)
	assert.Equal(t, earlier, got.Measurements[:3], "the earlier measurements are kept as they were")
	assert.Len(t, f.plans.signals(), 2, "the earlier ones were signalled by the attempt that took them")
	assert.Empty(t, f.plans.started, "the plan was told what the check asks by the attempt that began")
}

// A retry whose last heartbeat did not reach the server (heartbeats are
// throttled) goes on from the measurements the plan took by signal too:
// none is taken again, and their times are kept.
func TestAnalyseResumesWithThePlansMeasurements(t *testing.T) {
	f := newAnalysisFixture(t, config.Check{Count: 3}, "0.1")
	at := time.Now().UTC().Truncate(time.Millisecond)
	earlier := []meshapi.Measurement{{At: at.Add(-2 * time.Second), Value: 0.2, Passed: true}, {At: at.Add(-time.Second), Value: 0.3, Passed: true}}
	f.env.SetHeartbeatDetails(earlier[:1])
	for _, m := range earlier {
		f.plans.measured = append(f.plans.measured, planMeasured{plan: f.in.Plan, m: meshapi.Measured{Tier: 1, Check: meshapi.AnalysisCheck{Check: "error-rate"}, Measurement: m}})
	}
	got := f.run(t)
	assert.Equal(t, meshapi.AnalysisPassed, got.Verdict)
	require.Len(t, f.prom.asked(), 1, "only the third measurement is taken")
	require.Len(t, got.Measurements, 3)
	assert.Equal(t, earlier, got.Measurements[:2], "the plan's second measurement is kept as it was")
}

// The heartbeat carries the measurements as a retry reads them: a retry
// given what the first attempt heartbeated reaches its verdict without
// measuring again.
func TestAnalyseHeartbeatsMeasurements(t *testing.T) {
	f := newAnalysisFixture(t, config.Check{Count: 1}, "0.9")
	var mu sync.Mutex
	var beats []converter.EncodedValues
	f.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		beats = append(beats, d)
	})
	first := f.run(t)
	require.Equal(t, meshapi.AnalysisFailed, first.Verdict)
	mu.Lock()
	require.NotEmpty(t, beats, "the measurement was heartbeated")
	var beat []meshapi.Measurement
	require.NoError(t, beats[0].Get(&beat))
	mu.Unlock()
	assert.Equal(t, first.Measurements, beat)

	retry := newAnalysisFixture(t, config.Check{Count: 1}, "0.1")
	retry.env.SetHeartbeatDetails(beat)
	again := retry.run(t)
	assert.Equal(t, first, again, "the same verdict, reason and measurements")
	assert.Empty(t, retry.prom.asked())
}

// A retry whose heartbeat already decides the check takes nothing more.
func TestAnalyseResumesDecided(t *testing.T) {
	f := newAnalysisFixture(t, config.Check{Count: 5}, "0.1")
	f.env.SetHeartbeatDetails([]meshapi.Measurement{{At: time.Now().Add(-time.Second), Value: 0.9}})
	got := f.run(t)
	assert.Equal(t, meshapi.AnalysisFailed, got.Verdict)
	assert.Empty(t, f.prom.asked())
}

// The initial delay counts from Since, when the tier was healthy: a Since
// long past (a retry of an attempt that left no heartbeat) measures at
// once, one just now waits the delay.
func TestAnalyseInitialDelayFromSince(t *testing.T) {
	t.Run("since long past", func(t *testing.T) {
		// A delay counted from now instead would end the activity 30s
		// after it started (the test environment gives an activity ten
		// minutes, so an hour could not be told from a hang).
		const delay = 30 * time.Second
		f := newAnalysisFixture(t, config.Check{Count: 1, InitialDelay: delay}, "0.1")
		f.in.Since = time.Now().Add(-time.Hour)
		start := time.Now()
		got := f.run(t)
		assert.Equal(t, meshapi.AnalysisPassed, got.Verdict)
		require.Len(t, got.Measurements, 1)
		assert.True(t, got.Measurements[0].At.Before(start.Add(delay)), "measured at %s, the delay counted from the start %s", got.Measurements[0].At, start)
		require.Len(t, f.plans.started, 1, "the plan is told what the check asks before it measures")
		assert.Equal(t, meshapi.AnalysisRunning, f.plans.started[0].Check.Verdict, "no delay left to wait out")
		assert.Nil(t, f.plans.started[0].Check.FirstDue)
	})
	t.Run("since now", func(t *testing.T) {
		// A second: the plan is told "waiting" only while the delay is
		// still to come when the activity starts, which a loaded CI box
		// may take a while to do.
		f := newAnalysisFixture(t, config.Check{Count: 1, InitialDelay: time.Second}, "0.1")
		f.in.Since = time.Now().UTC().Truncate(time.Millisecond)
		got := f.run(t)
		require.Len(t, got.Measurements, 1)
		assert.False(t, got.Measurements[0].At.Before(f.in.Since.Add(time.Second)), "measured at %s, before the delay ended", got.Measurements[0].At)
		require.Len(t, f.plans.started, 1)
		s := f.plans.started[0]
		assert.Equal(t, 1, s.Tier)
		assert.Equal(t, meshapi.AnalysisWaiting, s.Check.Verdict)
		require.NotNil(t, s.Check.FirstDue)
		assert.True(t, s.Check.FirstDue.Equal(f.in.Since.Add(time.Second)), "first due %s", s.Check.FirstDue)
		assert.Equal(t, 1, s.Check.Count, "what the check asks")
		assert.NotEmpty(t, s.Check.Query)
		assert.Empty(t, s.Check.Measurements)
	})
}

// A provider that cannot be reached is named with its address and the
// error, for the person at the gate.
func TestAnalyseUnreachable(t *testing.T) {
	f := newAnalysisFixture(t, config.Check{Count: 2}, "0.1")
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	f.acts.Mesh.Current().Analysis.Providers["prom"] = config.Provider{Prometheus: &config.Prometheus{Address: addr}}
	got := f.run(t)
	assert.Equal(t, meshapi.AnalysisInconclusive, got.Verdict)
	assert.Contains(t, got.Reason, "prom ("+addr+") could not be measured 5 times in a row: prometheus: ")
	assert.Contains(t, got.Reason, "connection refused")
	assert.NotContains(t, got.Reason, "api/v1/query", "not the whole encoded request: a person reads this")
	assert.Len(t, got.Measurements, analysis.ErrorLimit+1)
}

// A check or provider the worker's config no longer has is inconclusive
// at once, naming it and what to do, rather than an error or a failure.
func TestAnalyseUnknownCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*config.Analysis, *meshapi.AnalyseInput)
		want   string
	}{
		{"unknown check", func(_ *config.Analysis, in *meshapi.AnalyseInput) { in.Check = "latency" },
			"check latency is not under analysis.checks in the worker's config; fix the worker's config, or approve"},
		{"unknown provider", func(a *config.Analysis, _ *meshapi.AnalyseInput) { delete(a.Providers, "prom") },
			"check error-rate names provider prom, which is not under analysis.providers in the worker's config; fix the worker's config"},
		{"query that does not render", func(a *config.Analysis, _ *meshapi.AnalyseInput) {
			c := a.Checks["error-rate"]
			c.Query = "{{.Nope}}"
			a.Checks["error-rate"] = c
		}, "check error-rate: query template:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAnalysisFixture(t, config.Check{Count: 1}, "0.1")
			tc.change(&f.acts.Mesh.Current().Analysis, &f.in)
			got := f.run(t)
			assert.Equal(t, meshapi.AnalysisInconclusive, got.Verdict)
			assert.Equal(t, f.in.Check, got.Check)
			assert.Contains(t, got.Reason, tc.want)
			assert.Empty(t, got.Measurements)
			assert.Empty(t, f.prom.asked())
			assert.Empty(t, f.plans.signals())
		})
	}
}
