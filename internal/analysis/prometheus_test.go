package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
)

// prometheusBinary is the Prometheus server, or a skip (a failure under
// CI, which installs Debian's prometheus package) saying how to get it.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("MESHROLL_PROMETHEUS"), "prometheus"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no prometheus server for the analysis test: apt-get install prometheus (or set MESHROLL_PROMETHEUS)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// codes are the status codes an exporter has a series for.
var codes = []string{"200", "500", "503"}

// exporter serves a request counter by status code in Prometheus' text
// format, as a module's /metrics would.
func exporter(t *testing.T, byCode map[string]int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		var b strings.Builder
		b.WriteString("# HELP requests_total Requests served, by status code.\n# TYPE requests_total counter\n")
		for _, code := range codes {
			fmt.Fprintf(&b, "requests_total{code=%q} %d\n", code, byCode[code])
		}
		_, err := w.Write([]byte(b.String()))
		assert.NoError(t, err)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startPrometheus runs a Prometheus server on a free loopback port scraping
// targets (job name to host:port) every second, and returns its address
// once it has scraped every job at least once.
func startPrometheus(t *testing.T, targets map[string]string) string {
	bin := prometheusBinary(t)
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n")
	for job, addr := range targets {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", job, addr)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(cfg.String()), 0o600))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	listen := l.Addr().String()
	require.NoError(t, l.Close())

	var out bytes.Buffer
	cmd := exec.Command(bin,
		"--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})

	addr := "http://" + listen
	// Scraped: every exporter's series (one per code) is stored.
	want := len(targets) * len(codes)
	q := addr + "/api/v1/query?" + url.Values{"query": {"count(requests_total)"}}.Encode()
	client := &http.Client{Timeout: 5 * time.Second}
	require.Eventually(t, func() bool {
		select {
		case err := <-exited:
			exited <- err // for the check below and the cleanup
			return true
		default:
		}
		resp, err := client.Get(q)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var a struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&a) != nil || len(a.Data.Result) != 1 {
			return false
		}
		return a.Data.Result[0].Value[1] == fmt.Sprint(want)
	}, time.Minute, 100*time.Millisecond, "prometheus never stored the exporters' %d series", want)
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("prometheus exited before scraping its targets: %v", err)
	default:
	}
	return addr
}

// TestPrometheus measures a real Prometheus server scraping a good build's
// exporter (no 5xx) and a bad one's: the same check passes the first and
// fails the second; a vector of several samples is judged element by
// element with all(); a query matching no series is an error, not a pass.
func TestPrometheus(t *testing.T) {
	good := exporter(t, map[string]int{"200": 120})
	bad := exporter(t, map[string]int{"200": 100, "500": 7, "503": 3})
	addr := startPrometheus(t, map[string]string{
		"good": strings.TrimPrefix(good.URL, "http://"),
		"bad":  strings.TrimPrefix(bad.URL, "http://"),
	})
	prov := config.Provider{Prometheus: &config.Prometheus{Address: addr}}
	errors5xx := config.Check{Query: `sum(requests_total{code=~"5..",job="{{.Module}}"})`, Success: "result < 1"}
	for _, tc := range []struct {
		name       string
		module     string
		check      config.Check
		wantValue  any
		wantPassed bool
		wantError  string
	}{
		{"good build passes", "good", errors5xx, 0.0, true, ""},
		{"bad build fails", "bad", errors5xx, 10.0, false, ""},
		{"vector, every element passes", "good", config.Check{Query: `requests_total{job="{{.Module}}"}`, Success: "all(result, # < 1000)"}, nil, true, ""},
		{"vector, one element fails", "bad", config.Check{Query: `requests_total{code=~"5..",job="{{.Module}}"}`, Success: "all(result, # < 5)"}, nil, false, ""},
		{"no series is no data", "absent", errors5xx, nil, false, "no data"},
		{"a ratio over nothing is no data", "good", config.Check{Query: `sum(requests_total{code=~"5..",job="{{.Module}}"}) / sum(requests_total{code="404",job="{{.Module}}"} or vector(0))`, Success: "result < 0.5"}, nil, false, "no data"},
		{"bad PromQL is an error", "good", config.Check{Query: `sum(`, Success: "result < 1"}, nil, false, "bad_data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := config.AnalysisVars{Module: tc.module}
			m := Measure(context.Background(), prov, tc.check, v, time.Now())
			if tc.wantError != "" {
				assert.Contains(t, m.Error, tc.wantError)
				assert.False(t, m.Passed)
				return
			}
			require.Empty(t, m.Error)
			assert.Equal(t, tc.wantPassed, m.Passed, "value %v", m.Value)
			if tc.wantValue != nil {
				assert.Equal(t, tc.wantValue, m.Value)
			} else {
				assert.IsType(t, []float64{}, m.Value)
			}
		})
	}
}
