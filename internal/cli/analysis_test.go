package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// measuredAt is when the fixtures' first measurement was taken.
var measuredAt = time.Date(2026, 12, 3, 14, 2, 0, 0, time.UTC)

// measurements are n good measurements of an error rate, 30 s apart:
// 0.01, 0.011, 0.012, ...
func measurements(n int) []meshapi.Measurement {
	out := make([]meshapi.Measurement, n)
	for i := range out {
		out[i] = meshapi.Measurement{At: measuredAt.Add(time.Duration(i) * 30 * time.Second), Value: 0.01 + float64(i)/1000, Passed: true}
	}
	return out
}

// errorRate is the check of the fixtures, as it ran for tier 1.
func errorRate(ms []meshapi.Measurement) meshapi.AnalysisCheck {
	return meshapi.AnalysisCheck{Check: "error-rate", Provider: "prom",
		Query:   `sum(rate(http_requests_total{code=~"5..",module="host",generation="27"}[1m]))`,
		Success: "result < 0.5", Interval: 30 * time.Second, Count: 10, FailureLimit: 1,
		Verdict: meshapi.AnalysisRunning, Measurements: ms}
}

// analysing is a plan whose tier 1 bakes under its error-rate check while
// tier 2 waits.
func analysing(ms []meshapi.Measurement) meshapi.PlanState {
	return meshapi.PlanState{Plan: "plan/host/c", Module: "host", Commit: "c", State: meshapi.PlanPushing,
		Tiers: []meshapi.TierState{
			{Tier: 1, State: meshapi.TierBaking, Machines: []meshapi.MachineProgress{
				{Machine: "edge-1", State: meshapi.MachineConverged, Seq: 4}, {Machine: "edge-2", State: meshapi.MachineConverged, Seq: 5}},
				Analysis: []meshapi.AnalysisCheck{errorRate(ms)}},
			{Tier: 2, State: meshapi.TierWaiting, Machines: []meshapi.MachineProgress{{Machine: "control-node", State: meshapi.MachineWaiting}}},
		}}
}

func TestShowAnalysis(t *testing.T) {
	const summary = "  tier 1 check error-rate running: "
	const query = `    query (prom): sum(rate(http_requests_total{code=~"5..",module="host",generation="27"}[1m]))`
	header := regexp.MustCompile(`^    TIME \(UTC\)\s+VALUE\s+VERDICT\s+ERROR$`)
	row := func(clock, value, verdict, err string) *regexp.Regexp {
		return regexp.MustCompile(`^    ` + regexp.QuoteMeta(clock) + `\s+` + regexp.QuoteMeta(value) + `\s+` + verdict + `\s+` + regexp.QuoteMeta(err) + `$`)
	}
	failed := measurements(3)
	failed[1] = meshapi.Measurement{At: failed[1].At, Value: 0.9}
	failed[2] = meshapi.Measurement{At: failed[2].At, Error: "query prom: Get \"http://127.0.0.1:9090/api/v1/query\":\n connection refused"}

	for _, tc := range []struct {
		name  string
		ms    []meshapi.Measurement
		limit measurementLimit
		// block is the analysis block's lines: a string is matched
		// exactly, a *regexp.Regexp as a pattern.
		block []any
	}{
		{"no measurement yet", nil, measurementLimit{n: DefaultMeasurements}, []any{
			summary + "0 of 10 measured, 0 failed of 1 allowed", query}},
		{"fewer than the limit", measurements(2), measurementLimit{n: DefaultMeasurements}, []any{
			summary + "2 of 10 measured, 0 failed of 1 allowed, last 0.011", query, header,
			row("14:02:00", "0.01", "passed", "-"), row("14:02:30", "0.011", "passed", "-")}},
		{"a failure and an error", failed, measurementLimit{n: DefaultMeasurements}, []any{
			summary + "2 of 10 measured, 1 failed of 1 allowed, 1 could not be measured, last -", query, header,
			row("14:02:00", "0.01", "passed", "-"), row("14:02:30", "0.9", "failed", "-"),
			row("14:03:00", "-", "error", `query prom: Get "http://127.0.0.1:9090/api/v1/query": connection refused`)}},
		{"more than the limit: the latest, and how many earlier", measurements(12), measurementLimit{n: DefaultMeasurements}, []any{
			summary + "12 of 10 measured, 0 failed of 1 allowed, last 0.021", query, header, "    … 2 earlier",
			row("14:03:00", "0.012", "passed", "-"), row("14:03:30", "0.013", "passed", "-"), row("14:04:00", "0.014", "passed", "-"),
			row("14:04:30", "0.015", "passed", "-"), row("14:05:00", "0.016", "passed", "-"), row("14:05:30", "0.017", "passed", "-"),
			row("14:06:00", "0.018", "passed", "-"), row("14:06:30", "0.019", "passed", "-"), row("14:07:00", "0.02", "passed", "-"),
			row("14:07:30", "0.021", "passed", "-")}},
		{"all", measurements(12), measurementLimit{all: true}, append([]any{
			summary + "12 of 10 measured, 0 failed of 1 allowed, last 0.021", query, header,
			row("14:02:00", "0.01", "passed", "-"), row("14:02:30", "0.011", "passed", "-")},
			anyRows(10)...)},
		{"none", measurements(12), measurementLimit{n: 0}, []any{
			summary + "12 of 10 measured, 0 failed of 1 allowed, last 0.021", query, "    12 measurements (--measurements to list them)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, (&app{stdout: &b}).printState(analysing(tc.ms), "", tc.limit, nil))
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			require.Len(t, lines, 3+2+len(tc.block)+1, b.String())
			assert.Regexp(t, `^TIER\s+MACHINE\s+STATE\s+SEQ\s+REASON$`, lines[2])
			// The block is under tier 1's rows and above tier 2's.
			assert.Regexp(t, `^1 \(baking\)\s+edge-1\s+converged\s+4\s+-$`, lines[3])
			assert.Regexp(t, `^1 \(baking\)\s+edge-2\s+converged\s+5\s+-$`, lines[4])
			for i, want := range tc.block {
				switch w := want.(type) {
				case string:
					assert.Equal(t, w, lines[5+i], "line %d", 5+i)
				case *regexp.Regexp:
					assert.Regexp(t, w, lines[5+i], "line %d", 5+i)
				}
			}
			last := lines[len(lines)-1]
			assert.Regexp(t, `^2 \(waiting\)\s+control-node\s+waiting\s+-\s+-$`, last)
			// Tier 2's row keeps the table's columns across the block.
			assert.Equal(t, strings.Index(lines[2], "STATE"), strings.Index(last, "waiting  "), "aligned:\n%s", b.String())
		})
	}
}

// anyRows matches n measurement rows of any time and value.
func anyRows(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = regexp.MustCompile(`^    \d\d:\d\d:\d\d\s+0\.0\d+\s+passed\s+-$`)
	}
	return out
}

// plan show --output json prints the state as the plan gave it: every
// measurement, whatever --measurements says.
func TestShowJSONCarriesMeasurements(t *testing.T) {
	var b bytes.Buffer
	st := analysing(measurements(12))
	require.NoError(t, (&app{stdout: &b, output: OutputJSON}).printJSON(st))
	var got meshapi.PlanState
	require.NoError(t, json.Unmarshal(b.Bytes(), &got))
	require.Len(t, got.Tiers[0].Analysis, 1)
	c := got.Tiers[0].Analysis[0]
	assert.Len(t, c.Measurements, 12)
	assert.Equal(t, meshapi.AnalysisRunning, c.Verdict)
	assert.Equal(t, st.Tiers[0].Analysis[0].Measurements[11].Value, c.Measurements[11].Value)
	assert.True(t, c.Measurements[11].At.Equal(measuredAt.Add(330*time.Second)))
}

func TestMeasurementsFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want measurementLimit
		err  bool
	}{
		{"all", measurementLimit{all: true}, false},
		{"ALL", measurementLimit{all: true}, false},
		{"5", measurementLimit{n: 5}, false},
		{"0", measurementLimit{n: 0}, false},
		{"-1", measurementLimit{}, true},
		{"some", measurementLimit{}, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var l measurementLimit
			err := l.Set(tc.in)
			if tc.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, l)
		})
	}
	// A bad value is a usage error, before anything dials.
	r := run(t, "--config", writeConfig(t), "plan", "show", "plan/host/"+commit, "--measurements", "many")
	require.Error(t, r.err)
	assert.Equal(t, ExitUsage, ExitCode(r.err))
	assert.Contains(t, r.err.Error(), `invalid argument "many" for "--measurements"`)
}

// plan watch prints a line per measurement as it arrives and one when a
// check's verdict changes, and nothing again for what it printed.
func TestWatchAnalysis(t *testing.T) {
	var b bytes.Buffer
	p := newProgressPrinter(&b, nil)
	step := func(st meshapi.PlanState) []string {
		b.Reset()
		p.show(st)
		var out []string
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if strings.HasPrefix(l, "tier 1 ") && !strings.HasPrefix(l, "tier 1: ") {
				out = append(out, l)
			}
		}
		return out
	}
	st := analysing(nil)
	st.Tiers[0].Analysis[0].Verdict = meshapi.AnalysisWaiting
	assert.Equal(t, []string{"tier 1 check error-rate waiting: 0 of 10 measured, 0 failed of 1 allowed"}, step(st))
	assert.Empty(t, step(st), "nothing moved")

	ms := measurements(3)
	ms[1] = meshapi.Measurement{At: ms[1].At, Value: 0.9}
	ms[2] = meshapi.Measurement{At: ms[2].At, Error: "query prom: connection refused"}
	st = analysing(ms[:1])
	assert.Equal(t, []string{
		"tier 1 error-rate: 0.01 passed (1 of 10)",
		"tier 1 check error-rate running: 1 of 10 measured, 0 failed of 1 allowed, last 0.01",
	}, step(st))
	st = analysing(ms)
	assert.Equal(t, []string{
		"tier 1 error-rate: 0.9 failed (1 failed of 1 allowed)",
		"tier 1 error-rate: - error: query prom: connection refused",
	}, step(st), "the verdict did not change")
	assert.Empty(t, step(st))

	st.Tiers[0].Analysis[0].Verdict, st.Tiers[0].Analysis[0].Reason = meshapi.AnalysisInconclusive, "prom unreachable for 3 measurements in a row"
	assert.Equal(t, []string{"tier 1 check error-rate inconclusive: 2 of 10 measured, 1 failed of 1 allowed, 1 could not be measured, last -; prom unreachable for 3 measurements in a row"}, step(st))

	// Following a plan that has measured for a while: the latest, after
	// a line counting the earlier.
	b.Reset()
	p = newProgressPrinter(&b, nil)
	got := step(analysing(measurements(15)))
	require.Len(t, got, 1+DefaultMeasurements+1, strings.Join(got, "\n"))
	assert.Equal(t, "tier 1 error-rate: … 5 earlier measurements", got[0])
	assert.Equal(t, "tier 1 error-rate: 0.015 passed (6 of 10)", got[1])
	assert.Equal(t, "tier 1 error-rate: 0.024 passed (15 of 10)", got[10])
	assert.Equal(t, "tier 1 check error-rate running: 15 of 10 measured, 0 failed of 1 allowed, last 0.024", got[11])
}

// inconclusive is a plan gated on tier 1's error-rate check, which could
// not be measured.
func inconclusive() meshapi.PlanState {
	st := analysing(measurements(2))
	st.State = meshapi.PlanGated
	st.Tiers[0].Analysis[0].Verdict = meshapi.AnalysisInconclusive
	st.Tiers[0].Analysis[0].Reason = "no measurement for 3 in a row: query prom: connection refused"
	return st
}

func TestNextStepAtAnInconclusiveCheck(t *testing.T) {
	const pass = "check error-rate of tier 1 is inconclusive: no measurement for 3 in a row: query prom: connection refused; " +
		"once you have checked why, pass it with: starter plan approve plan/host/c, or end the plan with: starter plan abort plan/host/c"
	two := inconclusive()
	latency := errorRate(nil)
	latency.Check, latency.Verdict, latency.Reason = "latency", meshapi.AnalysisInconclusive, "no data"
	two.Tiers[0].Analysis = append(two.Tiers[0].Analysis, latency)
	dry := inconclusive()
	dry.Tiers[0].Analysis[0].DryRun = true
	dryThenGate := gatedAt2()
	dryThenGate.Tiers[0].Analysis = dry.Tiers[0].Analysis
	approved := inconclusive()
	approved.State = meshapi.PlanPushing
	approved.Tiers[0].Analysis[0].Verdict, approved.Tiers[0].Analysis[0].Reason = meshapi.AnalysisApproved, "approved by alice"

	for _, tc := range []struct {
		name string
		st   meshapi.PlanState
		want string
	}{
		{"inconclusive", inconclusive(), pass},
		{"two inconclusive", two, "check error-rate of tier 1 is inconclusive: no measurement for 3 in a row: query prom: connection refused; " +
			"check latency of tier 1 is inconclusive: no data; once you have checked why, pass it with: starter plan approve plan/host/c, or end the plan with: starter plan abort plan/host/c"},
		// A dry run only reports: it holds nothing, so a gate reads as any.
		{"a dry run's inconclusive, at no tier's gate", dry, "approve with: starter plan approve plan/host/c"},
		{"a dry run's inconclusive, at tier 2's gate", dryThenGate, "approve with: starter plan approve plan/host/c --tier 2"},
		{"approved", approved, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, (&app{}).nextStep(context.Background(), tc.st, nil))
		})
	}

	// plan show says it under the header, plan watch once when the plan
	// starts waiting.
	var b bytes.Buffer
	st := inconclusive()
	a := &app{stdout: &b}
	require.NoError(t, a.printState(st, a.nextStep(context.Background(), st, nil), measurementLimit{n: DefaultMeasurements}, nil))
	assert.Equal(t, pass, strings.Split(b.String(), "\n")[1])
	b.Reset()
	p := newProgressPrinter(&b, nil)
	p.next = func(st meshapi.PlanState) string { return a.nextStep(context.Background(), st, nil) }
	p.show(st)
	p.show(st)
	assert.Equal(t, 1, strings.Count(b.String(), "plan approve"), b.String())
}

func TestApprovedWords(t *testing.T) {
	two := 2
	st := inconclusive()
	for _, tc := range []struct {
		name   string
		tier   *int
		checks []meshapi.TierCheck
		want   string
	}{
		{"a tier's gate", &two, nil, "approved tier 2 of plan plan/host/c"},
		{"an inconclusive check", nil, st.AnalysisGate(), "passed the inconclusive check error-rate of tier 1 of plan plan/host/c"},
		{"two", nil, []meshapi.TierCheck{{Tier: 1, Check: errorRate(nil)}, {Tier: 1, Check: meshapi.AnalysisCheck{Check: "latency"}}},
			"passed the inconclusive check error-rate of tier 1 and check latency of tier 1 of plan plan/host/c"},
		{"unread", nil, nil, "approved the gate plan plan/host/c was waiting at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, approvedWords("plan/host/c", tc.tier, tc.checks))
		})
	}
}
