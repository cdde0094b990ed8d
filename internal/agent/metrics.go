package agent

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Names of the agent's Prometheus metrics, served on PathMetrics.
const (
	// MetricApplies counts declarations judged, by outcome: applied,
	// repeat (acknowledged again), refused, error (not recorded).
	MetricApplies = "meshroll_host_applies_total"
	// MetricRefusals counts refusals by their code (downgrade, sequence,
	// unpinned, ...; see package host).
	MetricRefusals = "meshroll_host_refusals_total"
	// MetricApplyDuration times Apply: judging, journalling and
	// checkpointing a declaration, the runtime's hand-over included.
	MetricApplyDuration = "meshroll_host_apply_duration_seconds"
	// MetricJournalEntries and MetricJournalBytes are the journal's size.
	MetricJournalEntries = "meshroll_host_journal_entries"
	MetricJournalBytes   = "meshroll_host_journal_bytes"
	// MetricLastSeq is the last declaration sequence applied.
	MetricLastSeq = "meshroll_host_last_seq"
	// MetricContainers counts declared containers by runtime state
	// (starting, running, exited).
	MetricContainers = "meshroll_host_containers"
	// MetricInfo is 1, labelled with the machine and the runtime.
	MetricInfo = "meshroll_host_info"
)

// Outcomes counted by MetricApplies besides the journal's own.
const applyError = "error"

// agentMetrics are the agent's counters; the gauges are read from the agent
// at scrape time (collector), so they can never drift from its state.
type agentMetrics struct {
	applies  *prometheus.CounterVec
	refusals *prometheus.CounterVec
	duration prometheus.Histogram
}

func newAgentMetrics() *agentMetrics {
	m := &agentMetrics{
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricApplies, Help: "Declarations judged by the host agent, by outcome.",
		}, []string{"outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRefusals, Help: "Declarations the host agent refused, by refusal code.",
		}, []string{"code"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricApplyDuration, Help: "Time to judge, journal and hand over one declaration.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	for _, o := range []string{OutcomeApplied, OutcomeRepeat, OutcomeRefused, applyError} {
		m.applies.WithLabelValues(o) // present at 0 before the first apply
	}
	return m
}

// counted records one Apply call's outcome and duration.
func (m *agentMetrics) counted(start time.Time, outcome, code string) {
	m.applies.WithLabelValues(outcome).Inc()
	if code != "" {
		m.refusals.WithLabelValues(code).Inc()
	}
	m.duration.Observe(time.Since(start).Seconds())
}

var (
	descJournalEntries = prometheus.NewDesc(MetricJournalEntries, "Entries in the host agent's journal.", nil, nil)
	descJournalBytes   = prometheus.NewDesc(MetricJournalBytes, "Size of the host agent's journal file.", nil, nil)
	descLastSeq        = prometheus.NewDesc(MetricLastSeq, "Last declaration sequence the host agent applied.", nil, nil)
	descContainers     = prometheus.NewDesc(MetricContainers, "Declared containers by runtime state.", []string{"state"}, nil)
	descInfo           = prometheus.NewDesc(MetricInfo, "The machine the agent answers for and its runtime.", []string{"machine", "runtime"}, nil)
)

// collector serves an agent's metrics to one registry.
type collector struct{ a *Agent }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	c.a.metrics.applies.Describe(ch)
	c.a.metrics.refusals.Describe(ch)
	c.a.metrics.duration.Describe(ch)
	for _, d := range []*prometheus.Desc{descJournalEntries, descJournalBytes, descLastSeq, descContainers, descInfo} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	a.metrics.applies.Collect(ch)
	a.metrics.refusals.Collect(ch)
	a.metrics.duration.Collect(ch)
	a.mu.Lock()
	entries, bytes, lastSeq := len(a.journal.offs), a.journal.end, a.ledger.LastSeq
	states := map[string]int{mesh.StateStarting: 0, mesh.StateRunning: 0, mesh.StateExited: 0}
	for _, rc := range a.containers {
		states[rc.State]++
	}
	a.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descJournalEntries, prometheus.GaugeValue, float64(entries))
	ch <- prometheus.MustNewConstMetric(descJournalBytes, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(descLastSeq, prometheus.GaugeValue, float64(lastSeq))
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(descContainers, prometheus.GaugeValue, float64(n), s)
	}
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, a.machine, a.rt.Name())
}

// Collector is the agent's metrics as a prometheus.Collector, for a
// process that serves them on a registry of its own.
func (a *Agent) Collector() prometheus.Collector { return collector{a} }

// metricsHandler serves the agent's metrics and the Go runtime's on a
// registry of its own, so that two agents in one process (the dev stack)
// never mix their numbers.
func (a *Agent) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
