// Package telemetry is the worker's observability: Prometheus metrics (the
// Temporal SDK's own and meshroll's, which workflows emit through the SDK's
// replay-safe metrics handler), OpenTelemetry tracing through the SDK's
// interceptor, and the HTTP endpoint serving /metrics, /livez and /readyz.
// Everything is set by the worker section of the mesh config; tracing is
// off unless an OTLP endpoint is named, and nothing is served unless
// worker.metrics_listen is set.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/liveness"
)

// DurationBuckets are the histogram buckets, in seconds, of every SDK timer
// and meshroll duration: from a local activity (milliseconds) to a tier that
// waits on slow hosts (ten minutes). OpenTelemetry's defaults are for
// milliseconds and would put every push in one bucket.
var DurationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Options configures New.
type Options struct {
	// Worker is the mesh config's worker section.
	Worker config.Worker
	// Log gets export failures (a collector that is down) and the
	// endpoint's serving errors.
	Log zerolog.Logger
	// Help is the help text of metrics by name, as they are emitted (before
	// Prometheus adds _total or _seconds). The SDK's metrics handler has no
	// place for a description, so meshroll's own metrics get theirs here;
	// Prometheus tooling (promtool check metrics) expects every metric to
	// have one.
	Help map[string]string
	// SpanExporter, when set, receives the spans instead of the OTLP
	// exporter, and turns tracing on whatever the config says. It is for
	// tests (an in-memory exporter) and embedders.
	SpanExporter sdktrace.SpanExporter
}

// Telemetry holds the worker's metrics registry, its tracer, and the HTTP
// endpoint once served. Shutdown flushes and stops all of it.
type Telemetry struct {
	log      zerolog.Logger
	reg      *prometheus.Registry
	meters   *sdkmetric.MeterProvider
	handler  client.MetricsHandler
	tracer   *sdktrace.TracerProvider
	tracing  interceptor.Interceptor
	mu       sync.Mutex
	srv      *http.Server
	serveErr chan error
}

// New builds the metrics pipeline and, when configured, the tracer. It does
// not listen; see Serve.
func New(o Options) (*Telemetry, error) {
	t := &Telemetry{log: o.Log, reg: prometheus.NewRegistry()}
	t.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(t.reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.meters = sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exp),
		sdkmetric.WithView(view(o.Help)),
	)
	t.handler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                t.meters.Meter("meshroll"),
		UseMonotonicCounters: true,
		// A metric that cannot be recorded is not worth a crashed worker.
		OnError: func(err error) { o.Log.Warn().Err(err).Msg("metric not recorded") },
	})

	exporter := o.SpanExporter
	if exporter == nil && o.Worker.Tracing.OTLPEndpoint != "" {
		exporter, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(o.Worker.Tracing.OTLPEndpoint))
		if err != nil {
			_ = t.meters.Shutdown(context.Background())
			return nil, fmt.Errorf("worker.tracing.otlp_endpoint %s: %w", o.Worker.Tracing.OTLPEndpoint, err)
		}
	}
	if exporter != nil {
		res := resource.NewSchemaless(attribute.String("service.name", o.Worker.Tracing.Service()))
		t.tracer = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
		t.tracing, err = temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: t.tracer.Tracer("meshroll")})
		if err != nil {
			_ = t.Shutdown(context.Background())
			return nil, fmt.Errorf("tracing interceptor: %w", err)
		}
	}
	return t, nil
}

// sdkMetricsHelp is the help text of the SDK's own metrics (temporal_*),
// which the SDK emits without one; the reference describes each.
const sdkMetricsHelp = "Emitted by the Temporal Go SDK; each is described at https://docs.temporal.io/references/sdk-metrics"

// view is the one view of every instrument: histograms get DurationBuckets,
// a metric named in help its description, and the SDK's metrics a pointer
// to their reference. One view and not one per concern, since each
// matching view would export a stream of its own.
func view(help map[string]string) sdkmetric.View {
	return func(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
		s := sdkmetric.Stream{Name: i.Name, Description: i.Description, Unit: i.Unit}
		if h, ok := help[i.Name]; ok {
			s.Description = h
		} else if s.Description == "" && strings.HasPrefix(i.Name, "temporal_") {
			s.Description = sdkMetricsHelp
		}
		if i.Kind == sdkmetric.InstrumentKindHistogram {
			s.Aggregation = sdkmetric.AggregationExplicitBucketHistogram{Boundaries: DurationBuckets}
		}
		return s, true
	}
}

// ClientOptions returns o with the metrics handler and, when tracing is
// on, the tracing interceptor added. The SDK hands a client's interceptors
// and metrics to every worker built on it, so this is all the wiring a
// worker needs.
func (t *Telemetry) ClientOptions(o client.Options) client.Options {
	o.MetricsHandler = t.handler
	if t.tracing != nil {
		o.Interceptors = append(append([]interceptor.ClientInterceptor(nil), o.Interceptors...), t.tracing)
	}
	return o
}

// Tracing reports whether spans are exported.
func (t *Telemetry) Tracing() bool { return t.tracing != nil }

// Registry is where the metrics are gathered, for tests and for adding a
// collector of one's own.
func (t *Telemetry) Registry() *prometheus.Registry { return t.reg }

// Handler serves /metrics, /livez and /readyz; ready decides readiness.
func (t *Telemetry) Handler(ready liveness.Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{ErrorLog: promLogger{t.log}}))
	liveness.Mount(mux, ready)
	return mux
}

// Serve starts serving Handler(ready) on addr and returns the address it
// listens on (addr may have port 0). Shutdown stops it.
func (t *Telemetry) Serve(addr string, ready liveness.Check) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("worker.metrics_listen %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           t.Handler(ready),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
	}
	t.mu.Lock()
	t.srv, t.serveErr = srv, make(chan error, 1)
	t.mu.Unlock()
	go func() {
		err := srv.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			t.log.Error().Err(err).Str("address", ln.Addr().String()).Msg("metrics endpoint stopped")
		}
		t.serveErr <- err
	}()
	return ln.Addr(), nil
}

// Flush exports the spans still buffered, without stopping.
func (t *Telemetry) Flush(ctx context.Context) error {
	if t.tracer == nil {
		return nil
	}
	if err := t.tracer.ForceFlush(ctx); err != nil {
		return fmt.Errorf("flush spans: %w", err)
	}
	return nil
}

// Shutdown stops the endpoint and flushes the spans still buffered.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	t.mu.Lock()
	srv := t.srv
	t.srv = nil
	t.mu.Unlock()
	if srv != nil {
		errs = append(errs, srv.Shutdown(ctx))
	}
	if t.tracer != nil {
		errs = append(errs, t.tracer.Shutdown(ctx))
	}
	errs = append(errs, t.meters.Shutdown(ctx))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry shutdown: %w", err)
	}
	return nil
}

// promLogger sends promhttp's errors to the worker's log.
type promLogger struct{ log zerolog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn().Msg(fmt.Sprint(v...)) }
