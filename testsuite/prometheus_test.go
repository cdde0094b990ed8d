package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/analysis"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/meshfile"
)

// prometheusEnv names a Prometheus server binary to use instead of the one
// on PATH, as internal/analysis's test reads it.
const prometheusEnv = "MESHROLL_PROMETHEUS"

// prometheusBinary is the Prometheus server (Debian's prometheus package,
// which .ci/run installs), or a skip saying how to get it; under CI its
// absence fails the test, since CI is where the analysis must be shown.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv(prometheusEnv), "prometheus"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no prometheus server for the analysis tests: apt-get install prometheus (or set " + prometheusEnv + ")"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// promTarget is one scrape target as Prometheus' file-based discovery
// reads it: an address and the labels every series scraped from it gets.
type promTarget struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// promServer is a real Prometheus server on a free loopback port with its
// own storage, scraping every second whatever its targets file lists (the
// test rewrites it with SetTargets; Prometheus re-reads it within a
// second). It runs until the test ends, or Stop.
type promServer struct {
	t   *testing.T
	bin string
	// listen is host:port, kept across Stop and Start.
	listen string
	dir    string
	// targets is the file_sd file.
	targets string
	log     string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startPrometheus starts a Prometheus server and returns once it is ready
// (its /-/ready answers 200). The job it scrapes is "meshroll" and its
// scrape and discovery refresh intervals are 1s, so that a rate over 10s
// has samples within seconds of a container starting.
func startPrometheus(t *testing.T) *promServer {
	t.Helper()
	p := &promServer{t: t, bin: prometheusBinary(t), listen: "127.0.0.1:" + freePort(t), dir: t.TempDir()}
	p.targets = filepath.Join(p.dir, "targets.json")
	p.log = filepath.Join(p.dir, "prometheus.log")
	require.NoError(t, os.WriteFile(p.targets, []byte("[]\n"), 0o644))
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: meshroll
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, p.targets)
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "prometheus.yml"), []byte(cfg), 0o644))
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("prometheus log (last lines):\n%s", dsLastLines(string(out), 40))
		}
	})
	p.Start()
	return p
}

// Address is the server's base URL, what a prometheus provider's address
// is in mesh.yaml.
func (p *promServer) Address() string { return "http://" + p.listen }

// Start runs the server (again, after Stop: same address, same storage)
// and returns once it answers ready.
func (p *promServer) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Nil(p.t, p.cmd, "prometheus already runs")
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(p.t, err)
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(p.bin,
		"--config.file="+filepath.Join(p.dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(p.dir, "data"),
		"--web.listen-address="+p.listen,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(p.t, cmd.Start(), "start %s", p.bin)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done

	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-done:
			out, _ := os.ReadFile(p.log)
			p.t.Fatalf("prometheus exited before it was ready:\n%s", dsLastLines(string(out), 20))
		default:
		}
		if resp, err := hc.Get(p.Address() + "/-/ready"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		require.True(p.t, time.Now().Before(deadline), "prometheus on %s was not ready within a minute; its log is %s", p.listen, p.log)
		time.Sleep(50 * time.Millisecond) // polling interval only
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 30 s) and returns once
// it has exited; a server already stopped is left alone. What it stored
// stays for Start.
func (p *promServer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	stopGently(p.cmd.Process, p.done, syscall.SIGTERM)
	p.cmd, p.done = nil, nil
}

// SetTargets replaces the targets file, atomically (a rename), as a
// service-discovery sidecar would, so that Prometheus never reads half a
// file.
func (p *promServer) SetTargets(ts []promTarget) error {
	if ts == nil {
		ts = []promTarget{}
	}
	b, err := json.MarshalIndent(ts, "", "  ")
	if err != nil {
		return fmt.Errorf("targets: %w", err)
	}
	tmp := p.targets + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("targets: %w", err)
	}
	if err := os.Rename(tmp, p.targets); err != nil {
		return fmt.Errorf("targets: %w", err)
	}
	return nil
}

// promSample is one element of an instant vector: its labels and value.
type promSample struct {
	Labels map[string]string
	Value  float64
}

// Query evaluates an instant PromQL query now and returns its vector (a
// scalar is one sample without labels).
func (p *promServer) Query(ctx context.Context, q string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Address()+"/api/v1/query?"+url.Values{"query": {q}}.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&a); err != nil {
		return nil, fmt.Errorf("query %s: HTTP %d: %w", q, resp.StatusCode, err)
	}
	if a.Status != "success" {
		return nil, fmt.Errorf("query %s: HTTP %d: %s", q, resp.StatusCode, a.Error)
	}
	var raw []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	switch a.Data.ResultType {
	case "vector":
		if err := json.Unmarshal(a.Data.Result, &raw); err != nil {
			return nil, fmt.Errorf("query %s: %w", q, err)
		}
	case "scalar":
		raw = make([]struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}, 1)
		if err := json.Unmarshal(a.Data.Result, &raw[0].Value); err != nil {
			return nil, fmt.Errorf("query %s: %w", q, err)
		}
	default:
		return nil, fmt.Errorf("query %s: a %s, not an instant vector or scalar", q, a.Data.ResultType)
	}
	out := make([]promSample, 0, len(raw))
	for _, r := range raw {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: sample %v: %w", q, r.Value[1], err)
		}
		out = append(out, promSample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// errorRateAnalysis is an analysis section with one check, error-rate:
// the fraction of a build's /work requests answered 5xx over the last 10 s,
// across the machines that run it, read from prom (a requestsServer
// module's metrics, labelled by fleetTraffic's discovery), passing below
// 5%. interval, count and failure_limit are the check's; extra is more of
// its keys in flow style ("initial_delay: 5s, dry_run: true"), if any.
func errorRateAnalysis(prom *promServer, interval string, count, failureLimit int, extra string) string {
	return fmt.Sprintf(`
		providers:
		  prom: {prometheus: {address: %q}}
		checks:
		  error-rate:
		    provider: prom
		    query: 'sum(rate(http_requests_total{code=~"5..",module="{{.Module}}",generation="{{.Generation}}"}[10s])) / sum(rate(http_requests_total{module="{{.Module}}",generation="{{.Generation}}"}[10s]))'
		    success: 'result < 0.05'
		    interval: %s
		    count: %d
		    failure_limit: %d
		    %s
	`, prom.Address(), interval, count, failureLimit, strings.ReplaceAll(extra, ", ", "\n\t\t    "))
}

// The analysis harness on its own, without the analysis workflow: a real
// Prometheus server discovers a requestsServer module's containers on two
// machines of real host agents (exec runtime) as their hosts report them,
// scrapes them while callers send them requests, and the mesh's error-rate
// check, measured by internal/analysis from the config, sees no errors for
// a good build and the bad build's errors for a bad one; the bad build
// converged all the same, since its probe passes. Stopped, the server
// measures nothing (an error, not a pass); started again, it measures
// again from the storage it kept.
func TestPrometheusSeesABadBuildItsProbeDoesNot(t *testing.T) {
	t.Parallel()
	prom := startPrometheus(t)
	o := execHostMesh([]machineSpec{
		{name: "edge-1", tier: 1, modules: []string{"host"}},
		{name: "edge-2", tier: 1, modules: []string{"host"}},
	})
	o.health = requestsServerHealth
	// A dry run: the plans report the check and go on, so that the bad
	// build converges and is measured here.
	o.tiers = "{1: {analysis: [error-rate]}}"
	o.analysis = errorRateAnalysis(prom, "1s", 3, 0, "dry_run: true")
	s := newStack(t, o)
	check, ok := s.cfg.Analysis.Checks["error-rate"]
	require.True(t, ok, "the analysis section is in the config")
	provider := s.cfg.Analysis.Providers[check.Provider]
	require.NotNil(t, provider.Prometheus)
	require.Equal(t, prom.Address(), provider.Prometheus.Address)
	traffic := s.startTraffic(prom, "host")

	measure := func(st meshapi.PlanState, b mesh.Build) meshapi.Measurement {
		t.Helper()
		traffic.waitTargets(b.Generation, "edge-1", "edge-2")
		// Scraped: both machines' series of the build have a rate of
		// successful requests, so the measurement covers both.
		q := fmt.Sprintf(`count(rate(http_requests_total{code="200",module="host",generation="%d"}[10s]) > 0)`, b.Generation)
		eventually(t, 2*time.Minute, "prometheus to scrape generation "+strconv.FormatInt(b.Generation, 10)+" on both machines", func() bool {
			ss, err := prom.Query(context.Background(), q)
			return err == nil && len(ss) == 1 && ss[0].Value == 2
		})
		vars := config.AnalysisVars{Plan: st.Plan, Module: "host", Commit: b.Commit, Generation: b.Generation, Tier: 1, Machines: []string{"edge-1", "edge-2"}}
		m := analysis.Measure(context.Background(), provider, check, vars, time.Now())
		t.Logf("generation %d: measured %v (passed %v, error %q); callers saw %v", b.Generation, m.Value, m.Passed, m.Error, traffic.Answers(b.Generation))
		return m
	}

	good := s.commitSource("host", requestsServer("host good", 0))
	st := s.converge("host", good)
	goodBuild := s.build("host", good)
	m := measure(st, goodBuild)
	require.Empty(t, m.Error)
	require.Equal(t, 0.0, m.Value, "a good build answers no 5xx")
	require.True(t, m.Passed)

	bad := s.commitSource("host", requestsServer("host bad", 0.3))
	st = s.converge("host", bad)
	badBuild := s.build("host", bad)
	s.runs("edge-1", badBuild)
	s.runs("edge-2", badBuild)
	m = measure(st, badBuild)
	require.Empty(t, m.Error)
	v, isNumber := m.Value.(float64)
	require.True(t, isNumber, "one number: %#v", m.Value)
	require.Greater(t, v, 0.05, "3 of 10 requests fail")
	require.Less(t, v, 1.0, "and 7 of 10 pass")
	require.False(t, m.Passed, "the check fails the bad build its probe passed")
	require.Positive(t, traffic.Answers(badBuild.Generation)[http.StatusInternalServerError], "the callers saw the bad build's errors")
	require.Zero(t, traffic.Answers(goodBuild.Generation)[http.StatusInternalServerError], "and none of the good build's")

	vars := config.AnalysisVars{Plan: st.Plan, Module: "host", Commit: bad, Generation: badBuild.Generation, Tier: 1, Machines: []string{"edge-1", "edge-2"}}
	// A time whose scrapes are all stored, to measure again once the
	// server is back: every series has a sample after it (a target's
	// scrapes are stored in order).
	at := time.Now()
	q := fmt.Sprintf(`min(timestamp(http_requests_total{module="host",generation="%d"}))`, badBuild.Generation)
	eventually(t, time.Minute, "a scrape of every series after "+at.Format(time.RFC3339Nano), func() bool {
		ss, err := prom.Query(context.Background(), q)
		return err == nil && len(ss) == 1 && ss[0].Value > float64(at.UnixMilli())/1000
	})
	before := analysis.Measure(context.Background(), provider, check, vars, at)
	require.Empty(t, before.Error)
	prom.Stop()
	m = analysis.Measure(context.Background(), provider, check, vars, time.Now())
	t.Logf("prometheus stopped: %q", m.Error)
	require.NotEmpty(t, m.Error, "a stopped server measures nothing")
	require.False(t, m.Passed)
	prom.Start()
	m = analysis.Measure(context.Background(), provider, check, vars, at)
	require.Empty(t, m.Error, "started again, it answers from the storage it kept")
	require.Equal(t, before.Value, m.Value, "the same measurement as before it stopped")
}

// A test mesh's analysis option reads as the mesh.yaml a person writes:
// meshfile takes the section in block style from a Go raw string
// indented with tabs, or in flow style, and the tiers name its checks.
func TestAnalysisOptionOfATestMesh(t *testing.T) {
	t.Parallel()
	prom := &promServer{listen: "127.0.0.1:9"} // only its address is read
	for _, tc := range []struct {
		name     string
		analysis string
	}{
		{"block style, tab-indented", errorRateAnalysis(prom, "2s", 4, 1, "")},
		{"flow style", fmt.Sprintf(`{providers: {prom: {prometheus: {address: %q}}}, checks: {error-rate: {provider: prom, query: 'sum(up)', success: 'result < 0.05', interval: 2s, count: 4, failure_limit: 1}}}`, prom.Address())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := meshfile.File{
				Address: "127.0.0.1:7233", TaskQueue: "q",
				Modules:  []meshfile.Module{{Name: "host", Repo: "."}},
				Machines: []meshfile.Machine{{Name: "edge-1", Host: "http://127.0.0.1:1", Tier: 1, Modules: []string{"host"}}},
				Tiers:    "{1: {max_parallel: 1, bake: 5s, analysis: [error-rate]}}",
				Analysis: tc.analysis,
			}.String()
			cfg, err := config.Parse("test mesh.yaml", []byte(y))
			require.NoError(t, err, y)
			require.Equal(t, []string{"error-rate"}, cfg.Tiers[1].Analysis)
			require.Equal(t, 5*time.Second, cfg.Tiers[1].Bake)
			ch := cfg.Analysis.Checks["error-rate"]
			require.Equal(t, "prom", ch.Provider)
			require.Equal(t, prom.Address(), cfg.Analysis.Providers["prom"].Prometheus.Address)
			require.Equal(t, 2*time.Second, ch.Interval)
			require.Equal(t, 4, ch.Count)
			require.Equal(t, 1, ch.FailureLimit)
			require.Equal(t, "result < 0.05", ch.Success)
			require.NotEmpty(t, ch.Query)
		})
	}
}
