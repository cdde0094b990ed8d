package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/liveness"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/telemetry/scrape"
)

func TestMetricsAfterApplies(t *testing.T) {
	h := newHarness(t, t.TempDir(), withToken("s3cret"))
	before, err := scrape.Get(context.Background(), h.srv.URL+PathMetrics)
	require.NoError(t, err, "metrics need no token")
	for _, o := range []string{OutcomeApplied, OutcomeRepeat, OutcomeRefused} {
		v, ok := before.Value(MetricApplies, map[string]string{"outcome": o})
		assert.True(t, ok, "%s{outcome=%q} is served before the first apply", MetricApplies, o)
		assert.Zero(t, v)
	}

	h.mustApply(decl(1, ctr("web", 5)))
	h.waitState("web", mesh.StateRunning)
	assert.True(t, h.mustApply(decl(1, ctr("web", 5))).Repeat)
	_, err = h.apply(decl(2, ctr("web", 4)))
	requireRefused(t, err, host.CodeDowngrade)

	m, err := scrape.Get(context.Background(), h.srv.URL+PathMetrics)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{MetricApplies, map[string]string{"outcome": OutcomeApplied}, 1},
		{MetricApplies, map[string]string{"outcome": OutcomeRepeat}, 1},
		{MetricApplies, map[string]string{"outcome": OutcomeRefused}, 1},
		{MetricApplies, map[string]string{"outcome": applyError}, 0},
		{MetricRefusals, map[string]string{"code": host.CodeDowngrade}, 1},
		{MetricApplyDuration, nil, 3},
		{MetricJournalEntries, nil, float64(len(h.journal()))},
		{MetricLastSeq, nil, 1},
		{MetricContainers, map[string]string{"state": mesh.StateRunning}, 1},
		{MetricContainers, map[string]string{"state": mesh.StateStarting}, 0},
		{MetricInfo, map[string]string{"machine": testMachine, "runtime": RuntimeNoop}, 1},
	} {
		got, ok := m.Value(tc.name, tc.labels)
		assert.True(t, ok, "%s%v not served", tc.name, tc.labels)
		assert.Equal(t, tc.want, got, "%s%v", tc.name, tc.labels)
	}
	bytes, _ := m.Value(MetricJournalBytes, nil)
	assert.Greater(t, bytes, 0.0, "journal size in bytes")
	assert.GreaterOrEqual(t, len(h.journal()), 4, "applied, running, repeat and refused are journalled")
}

func TestProbesAndNoMetrics(t *testing.T) {
	h := newHarness(t, t.TempDir(), withToken("s3cret"))
	for _, tc := range []struct {
		path string
		want int
	}{
		{liveness.PathLive, http.StatusOK},
		{liveness.PathReady, http.StatusOK},
		{host.PathHealthz, http.StatusOK},
		{host.PathReport, http.StatusUnauthorized},
	} {
		resp, err := http.Get(h.srv.URL + tc.path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, tc.want, resp.StatusCode, "GET %s without a token", tc.path)
	}

	srv := httptest.NewServer(NewHandlerWith(h.a, HandlerOptions{Token: "s3cret", NoMetrics: true}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + PathMetrics)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.NotEqual(t, http.StatusOK, resp.StatusCode, "NoMetrics leaves /metrics unserved")

	require.NoError(t, h.a.Close(context.Background()))
	resp, err = http.Get(h.srv.URL + liveness.PathReady)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a closed agent is not ready")
	resp, err = http.Get(h.srv.URL + liveness.PathLive)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "but the process still lives")
}
