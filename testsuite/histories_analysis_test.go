package testsuite

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// TestCaptureAnalysisHistories records the histories of plans that run
// analysis checks: one whose check passes, one whose check fails and puts
// tier 1 back, and one whose check cannot be measured and is approved by a
// person. It reads a web provider the
// test serves (its answer is what the test sets), so that the capture
// needs no Prometheus. It runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureAnalysisHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	var rate atomic.Value // the error rate the provider answers, as JSON; "down" answers 503
	rate.Store("0")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		v := rate.Load().(string)
		if v == "down" {
			http.Error(w, "down for the capture", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"error_rate": %s}`, v)
	}))
	defer srv.Close()

	o := exampleMesh()
	o.machines = append(o.machines, machineSpec{name: "edge-2", tier: 1, modules: []string{"host"}})
	o.tiers = "{1: {max_parallel: 1, analysis: [error-rate]}}"
	o.analysis = fmt.Sprintf(`{providers: {status: {web: {url: "%s/{{.Module}}", json_path: "$.error_rate"}}},
  checks: {error-rate: {provider: status, success: "result < 0.5", interval: 200ms, count: 2}}}`, srv.URL)
	s := captureStack(t, o)

	passed := s.start("host", s.commit("host")).ID
	require.Equal(t, meshapi.PlanConverged, s.wait(passed).State)

	rate.Store("0.9")
	failed := s.start("host", s.commit("host")).ID
	st := s.wait(failed)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)

	rate.Store("down")
	approved := s.startGated("host", s.commit("host"))
	rate.Store("0")
	_, err := controlPlan(s, approved, meshapi.UpdateApprove, meshapi.ApproveInput{By: "capture"})
	require.NoError(t, err)
	require.Equal(t, meshapi.PlanConverged, s.wait(approved).State)

	s.writeHistories(
		capturedRun{"plan-analysis-passed", passed, ""},
		capturedRun{"plan-analysis-failed-put-back", failed, ""},
		capturedRun{"plan-analysis-inconclusive-approved", approved, ""},
	)
}
