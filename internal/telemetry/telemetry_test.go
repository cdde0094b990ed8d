package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/telemetry/scrape"
)

func TestTracingSwitch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		worker   config.Worker
		exporter bool
		want     bool
	}{
		{name: "off by default", worker: config.Default().Worker, want: false},
		{name: "on with an OTLP endpoint", worker: config.Worker{Tracing: config.Tracing{OTLPEndpoint: "http://127.0.0.1:1"}}, want: true},
		{name: "on with an exporter of one's own", exporter: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Worker: tc.worker, Log: zerolog.Nop()}
			if tc.exporter {
				o.SpanExporter = tracetest.NewInMemoryExporter()
			}
			tel, err := New(o)
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = tel.Shutdown(ctx) // an unreachable collector may fail the flush
			}()
			assert.Equal(t, tc.want, tel.Tracing())
			co := tel.ClientOptions(client.Options{})
			assert.NotNil(t, co.MetricsHandler, "metrics are always wired")
			if tc.want {
				assert.Len(t, co.Interceptors, 1, "the tracing interceptor is on the client, so workers inherit it")
			} else {
				assert.Empty(t, co.Interceptors, "no interceptor when tracing is off")
			}
		})
	}
}

func TestHandlerServesSDKMetrics(t *testing.T) {
	tel, err := New(Options{Log: zerolog.Nop()})
	require.NoError(t, err)
	defer func() { _ = tel.Shutdown(context.Background()) }()
	h := tel.ClientOptions(client.Options{}).MetricsHandler.WithTags(map[string]string{"machine": "edge-1"})
	h.Counter("meshroll_test_events").Inc(3)
	h.Gauge("meshroll_test_level").Update(7)
	h.Timer("meshroll_test_wait").Record(1500 * time.Millisecond)

	srv := httptest.NewServer(tel.Handler(nil))
	defer srv.Close()
	m, err := scrape.Get(context.Background(), srv.URL+"/metrics")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"meshroll_test_events_total", 3},
		{"meshroll_test_level", 7},
		{"meshroll_test_wait_seconds", 1}, // one observation
	} {
		v, ok := m.Value(tc.name, map[string]string{"machine": "edge-1"})
		assert.True(t, ok, "%s served", tc.name)
		assert.Equal(t, tc.want, v, tc.name)
	}
	_, ok := m.Value("go_goroutines", nil)
	assert.True(t, ok, "the Go runtime's metrics are served too")
	resp, err := http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// Help text reaches /metrics: meshroll's from Options.Help (a timer keeps
// its buckets with it), the SDK's a pointer to its reference, and a
// meshroll metric nobody described none, for promtool to catch.
func TestHelpText(t *testing.T) {
	tel, err := New(Options{Log: zerolog.Nop(), Help: map[string]string{
		"meshroll_test_events": "Events of the test.",
		"meshroll_test_wait":   "Waits of the test.",
	}})
	require.NoError(t, err)
	defer func() { _ = tel.Shutdown(context.Background()) }()
	h := tel.ClientOptions(client.Options{}).MetricsHandler
	h.Counter("meshroll_test_events").Inc(1)
	h.Timer("meshroll_test_wait").Record(time.Second)
	h.Counter("temporal_test_requests").Inc(1)
	h.Counter("meshroll_test_undescribed").Inc(1)

	srv := httptest.NewServer(tel.Handler(nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	text := string(body)
	assert.Contains(t, text, "# HELP meshroll_test_events_total Events of the test.\n")
	assert.Contains(t, text, "# HELP meshroll_test_wait_seconds Waits of the test.\n")
	assert.Contains(t, text, `meshroll_test_wait_seconds_bucket{le="2.5"} 1`, "the timer keeps DurationBuckets")
	assert.Contains(t, text, "# HELP temporal_test_requests_total "+sdkMetricsHelp+"\n")
	assert.NotContains(t, text, "# HELP meshroll_test_undescribed_total E")
}
