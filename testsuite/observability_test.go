package testsuite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/liveness"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/telemetry"
	"github.com/meshroll/meshroll/internal/telemetry/scrape"
	"github.com/meshroll/meshroll/internal/workerapp"
	"github.com/meshroll/meshroll/workflows"
)

// observedWorker replaces the stack's worker with one wired as the worker
// binary wires it (workerapp.Dial's options: telemetry's metrics handler
// and tracing interceptor on the client), serving /metrics, /livez and
// /readyz on loopback. Spans go to exp.
func observedWorker(t *testing.T, s *stack, exp *tracetest.InMemoryExporter) (base string, tel *telemetry.Telemetry) {
	t.Helper()
	s.worker.Stop()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	tel, err := telemetry.New(telemetry.Options{Worker: s.cfg.Worker, Log: log, Help: workflows.MetricHelp, SpanExporter: exp})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	c, err := client.NewClientFromExisting(s.c, tel.ClientOptions(s.clientOptions()))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ready := workerapp.NewReadiness(c)
	addr, err := tel.Serve("127.0.0.1:0", ready.Check)
	require.NoError(t, err)
	base = "http://" + addr.String()
	code, body := get(t, base+liveness.PathReady)
	assert.Equal(t, http.StatusServiceUnavailable, code, "not ready before the worker starts: %s", body)
	assert.Contains(t, body, "worker not started")

	w := workerapp.New(c, s.cfg, s.repo, workerapp.Deps{Catalogue: s.cat, Builder: s.builder, Hosts: &config.Hosts{Mesh: s.cfg}}, log)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ready.Started()
	s.worker = w
	code, body = get(t, base+liveness.PathReady)
	assert.Equal(t, http.StatusOK, code, "ready once started and Temporal answers: %s", body)
	code, _ = get(t, base+liveness.PathLive)
	assert.Equal(t, http.StatusOK, code)
	return base, tel
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// metricUntil scrapes url until cond holds for the named metric (a counter
// or gauge summed over the samples matching labels), failing with what it
// waited for and the last value seen.
func metricUntil(t *testing.T, url, name string, labels map[string]string, what string, cond func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		m, err := scrape.Get(context.Background(), url)
		require.NoError(t, err)
		v, ok := m.Value(name, labels)
		if ok && cond(v) {
			return
		}
		last = fmt.Sprintf("found=%v value=%v", ok, v)
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
	t.Fatalf("timed out waiting for %s%v to be %s (last scrape: %s)", name, labels, what, last)
}

func TestMetricsDuringAPlan(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{
		modules: []string{"svc", "side"},
		machines: []machineSpec{
			{name: "edge-1", tier: 0, modules: []string{"svc", "side"}},
			{name: "edge-2", tier: 1, modules: []string{"svc"}},
		},
	})
	exp := tracetest.NewInMemoryExporter()
	base, tel := observedWorker(t, s, exp)
	metrics := base + "/metrics"

	// Two plans wait at their gate before tier 0 with their declarations
	// composed; with edge-1 down, the first approved push stays in flight
	// (retrying) and the second waits in edge-1's queue.
	svc := s.start("svc", s.git("log", "-1", "--format=%H", "--", "examples/svc"), 0, 1)
	side := s.start("side", s.git("log", "-1", "--format=%H", "--", "examples/side"), 0)
	waitFor(t, s, svc.ID, meshapi.PlanGated)
	waitFor(t, s, side.ID, meshapi.PlanGated)
	metricUntil(t, metrics, workflows.MetricPlansStarted+"_total", map[string]string{"module": "svc"}, "1", func(v float64) bool { return v == 1 })
	metricUntil(t, metrics, workflows.MetricPlansStarted+"_total", map[string]string{"module": "side"}, "1", func(v float64) bool { return v == 1 })

	s.hosts["edge-1"].SetDown(true)
	_, err := controlPlan(s, svc.ID, meshapi.UpdateApprove, meshapi.ApproveInput{By: "test"})
	require.NoError(t, err)
	_, err = controlPlan(s, side.ID, meshapi.UpdateApprove, meshapi.ApproveInput{By: "test"})
	require.NoError(t, err)
	queue := map[string]string{"machine": "edge-1"}
	metricUntil(t, metrics, workflows.MetricQueueLength, queue, "1 (one push in flight to the down host, one waiting)", func(v float64) bool { return v == 1 })

	s.hosts["edge-1"].SetDown(false)
	waitFor(t, s, side.ID, meshapi.PlanConverged)
	metricUntil(t, metrics, workflows.MetricQueueLength, queue, "0 once the host is back", func(v float64) bool { return v == 0 })
	metricUntil(t, metrics, workflows.MetricPushes+"_total", map[string]string{"machine": "edge-1", "outcome": string(meshapi.MachineConverged)}, "2", func(v float64) bool { return v == 2 })
	metricUntil(t, metrics, workflows.MetricPlansEnded+"_total", map[string]string{"module": "side", "state": string(meshapi.PlanConverged)}, "1", func(v float64) bool { return v == 1 })
	m, err := scrape.Get(context.Background(), metrics)
	require.NoError(t, err)
	_, ended := m.Value(workflows.MetricPlansEnded+"_total", map[string]string{"module": "svc"})
	assert.False(t, ended, "svc waits at its second gate: not ended")

	one := 1
	_, err = controlPlan(s, svc.ID, meshapi.UpdateApprove, meshapi.ApproveInput{Tier: &one, By: "test"})
	require.NoError(t, err)
	waitFor(t, s, svc.ID, meshapi.PlanConverged)
	metricUntil(t, metrics, workflows.MetricPlansEnded+"_total", map[string]string{"module": "svc", "state": string(meshapi.PlanConverged)}, "1", func(v float64) bool { return v == 1 })
	metricUntil(t, metrics, workflows.MetricTierDuration+"_seconds", map[string]string{"module": "svc", "state": string(meshapi.TierConverged)}, "2 tiers timed", func(v float64) bool { return v == 2 })
	metricUntil(t, metrics, workflows.MetricPushes+"_total", map[string]string{"machine": "edge-2", "outcome": string(meshapi.MachineConverged)}, "1", func(v float64) bool { return v == 1 })

	// The SDK's own metrics are on the same endpoint.
	m, err = scrape.Get(context.Background(), metrics)
	require.NoError(t, err)
	for _, name := range []string{"temporal_workflow_completed_total", "temporal_activity_execution_latency_seconds", "temporal_request_total"} {
		_, ok := m.Value(name, nil)
		assert.True(t, ok, "SDK metric %s served", name)
	}

	// The host agent's metrics after its applies.
	hm, err := scrape.Get(context.Background(), s.hosts["edge-1"].URL()+agent.PathMetrics)
	require.NoError(t, err)
	applied, _ := hm.Value(agent.MetricApplies, map[string]string{"outcome": agent.OutcomeApplied})
	assert.Equal(t, float64(len(s.hosts["edge-1"].Applied())), applied, "agent counts each apply its journal shows")
	assert.Equal(t, 2.0, applied)
	running, _ := hm.Value(agent.MetricContainers, map[string]string{"state": "running"})
	assert.Equal(t, 2.0, running, "svc and side run on edge-1")

	// Both endpoints, scraped for real, pass Prometheus's own linter: every
	// metric has help text, counters end in _total, units are base units.
	promtoolCheck(t, "worker", metrics)
	promtoolCheck(t, "host agent", s.hosts["edge-1"].URL()+agent.PathMetrics)

	// Tracing: the interceptor made spans of the plan's activities.
	require.NoError(t, tel.Flush(context.Background()))
	names := map[string]bool{}
	for _, sp := range exp.GetSpans() {
		names[sp.Name] = true
	}
	// (A plan of one machine builds and composes in one activity.)
	for _, want := range []string{"RunWorkflow:" + meshapi.PlanWorkflowType, "RunActivity:BuildAndCompose", "RunActivity:PushAndAnswer"} {
		assert.True(t, names[want], "span %s among %d spans: %v", want, len(names), strings.Join(keys(names), ", "))
	}
}

func TestRefusalMetrics(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{
		modules:  []string{"svc"},
		machines: []machineSpec{{name: "edge-1", tier: 0, modules: []string{"svc"}}},
	})
	base, _ := observedWorker(t, s, tracetest.NewInMemoryExporter())
	metrics := base + "/metrics"
	// Someone ran a build by hand: edge-1 runs a digest the catalogue does
	// not know, which the guard refuses to replace unforced.
	_, err := s.hosts["edge-1"].a.Apply(context.Background(), mesh.Declaration{
		Machine: "edge-1", Seq: 1, Plan: "by-hand", Request: "by-hand@edge-1",
		Containers: []mesh.Container{{Module: "svc", Digest: "sha256:" + strings.Repeat("ab", 32), Generation: 1}},
	})
	require.NoError(t, err)

	p := s.start("svc", s.git("rev-parse", "HEAD"))
	st := waitFor(t, s, p.ID, meshapi.PlanRefused)
	assert.Contains(t, st.Reason, "does not know")
	machine := map[string]string{"machine": "edge-1"}
	metricUntil(t, metrics, workflows.MetricRefusals+"_total", map[string]string{"machine": "edge-1", "reason": meshapi.ErrUnknownDigest}, "1", func(v float64) bool { return v == 1 })
	metricUntil(t, metrics, workflows.MetricPushes+"_total", map[string]string{"machine": "edge-1", "outcome": string(meshapi.MachineRefused)}, "1", func(v float64) bool { return v == 1 })
	metricUntil(t, metrics, workflows.MetricPlansEnded+"_total", map[string]string{"module": "svc", "state": string(meshapi.PlanRefused)}, "1", func(v float64) bool { return v == 1 })
	metricUntil(t, metrics, workflows.MetricTierDuration+"_seconds", map[string]string{"module": "svc", "state": string(meshapi.TierHalted)}, "1 halted tier timed", func(v float64) bool { return v == 1 })
	m, err := scrape.Get(context.Background(), metrics)
	require.NoError(t, err)
	_, converged := m.Value(workflows.MetricPushes+"_total", map[string]string{"machine": "edge-1", "outcome": string(meshapi.MachineConverged)})
	assert.False(t, converged, "nothing converged on %v", machine)
}

// promtoolCheck scrapes url and runs promtool check metrics on what it
// served. promtool comes with Debian's prometheus package, which .ci/run
// installs; a local run without it skips the check.
func promtoolCheck(t *testing.T, what, url string) {
	t.Helper()
	promtool := os.Getenv("MESHROLL_PROMTOOL")
	if promtool == "" {
		p, err := exec.LookPath("promtool")
		if err != nil {
			msg := "no promtool to lint /metrics with: apt-get install prometheus (or set MESHROLL_PROMTOOL)"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Log(msg)
			return
		}
		promtool = p
	}
	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "# HELP meshroll_", "the %s serves meshroll's metrics", what)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "promtool check metrics on the %s's %s:\n%s", what, url, out)
	assert.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics on the %s's %s", what, url)
}

// An analysis check's verdict is a metric of the worker, by module, tier,
// check and verdict: what an alert on failed or inconclusive checks reads.
func TestAnalysisMetrics(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"error_rate": 0.01}`)
	}))
	defer srv.Close()
	// A measurement may take its check's interval at most: at 100 ms, CI's
	// box, loaded by the suite, timed five in a row out and the check
	// ended inconclusive.
	s := newStack(t, stackOptions{
		modules:  []string{"svc"},
		machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"svc"}}},
		tiers:    "{1: {analysis: [error-rate]}}",
		analysis: fmt.Sprintf(`{providers: {status: {web: {url: "%s", json_path: "$.error_rate"}}},
  checks: {error-rate: {provider: status, success: "result < 0.5", interval: 1s, count: 2}}}`, srv.URL),
	})
	base, _ := observedWorker(t, s, tracetest.NewInMemoryExporter())
	metrics := base + "/metrics"
	st := s.converge("svc", s.git("rev-parse", "HEAD"))
	require.Equal(t, meshapi.AnalysisPassed, st.Tiers[0].Analysis[0].Verdict)
	metricUntil(t, metrics, workflows.MetricAnalyses+"_total",
		map[string]string{"module": "svc", "tier": "1", "check": "error-rate", "verdict": string(meshapi.AnalysisPassed)}, "1", func(v float64) bool { return v == 1 })
	promtoolCheck(t, "worker", metrics)
}
