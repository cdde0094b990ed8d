package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/notify"
	"github.com/meshroll/meshroll/internal/secret"
)

// notifySecret signs the test receiver's deliveries.
const notifySecret = "notify-s3cret"

// notifyReceiver is a webhook notify target that is down (503) for its
// next downFor requests, then answers 200. It records every request's
// idempotency key and the events it took, in arrival order.
type notifyReceiver struct {
	mu      sync.Mutex
	downFor int
	tries   map[string]int // by idempotency key, every try
	taken   []notify.Body  // answered 200, in order
	bad     []string       // what was wrong with a request
}

func newNotifyReceiver(t *testing.T, downFor int) (*notifyReceiver, string) {
	r := &notifyReceiver{downFor: downFor, tries: map[string]int{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/hook"
}

func (r *notifyReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	var b notify.Body
	if err := json.Unmarshal(body, &b); err != nil {
		r.bad = append(r.bad, "body: "+err.Error())
	}
	if got, want := req.Header.Get(notify.SignatureHeader), notify.Sign(secret.String(notifySecret), body); got != want {
		r.bad = append(r.bad, fmt.Sprintf("signature of %s: %q, want %q", b.ID, got, want))
	}
	if k := req.Header.Get(notify.KeyHeader); k != b.ID {
		r.bad = append(r.bad, fmt.Sprintf("key header %q, body id %q", k, b.ID))
	}
	r.tries[b.ID]++
	if r.downFor > 0 {
		r.downFor--
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	r.taken = append(r.taken, b)
}

// events is the events taken of plan, in order.
func (r *notifyReceiver) events(plan string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range r.taken {
		if b.Plan == plan {
			out = append(out, b.Event)
		}
	}
	return out
}

// A notification receiver down for its first three tries gets every event
// it asked for of a gated plan that is approved and converges, and of a
// plan that halts, each once (it answered 200 once per key), in the order
// they happened, signed, the failed tries with the same key as the one
// that went through; a plan never waits for it.
func TestNotificationsReachADownReceiverOnceEach(t *testing.T) {
	t.Parallel()
	rcv, url := newNotifyReceiver(t, 3)
	o := exampleMesh()
	o.push = "{retry_budget: 2s, running_timeout: 30s}"
	o.notify = fmt.Sprintf("{fleet_url: 'http://fleet.example/', targets: {team: {kind: webhook, url: %q, secret: %q, "+
		"events: [plan_started, plan_gated, plan_halted, plan_converged, build_rejected], modules: [host]}}}", url, notifySecret)
	s := newStack(t, o)
	_ = s.commit("mesh-controller")

	gated := s.startGated("host", s.commit("host"), 2)
	_, err := controlPlan(s, gated, meshapi.UpdateApprove, meshapi.ApproveInput{By: "test"})
	require.NoError(t, err)
	st := s.wait(gated)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	// The plan did not wait for the receiver: its events are delivered
	// after it ended. The halted plan starts once they are, so that the
	// receiver's three failures all fall on the first event.
	eventually(t, 2*time.Minute, "the gated plan's events delivered", func() bool { return len(rcv.events(gated)) >= 3 })

	s.hosts["edge-1"].SetDown(true)
	bad := s.commit("host")
	halted := s.start("host", bad).ID
	st = s.wait(halted)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	// The operator rejects the build the halted plan could not push.
	out, err := s.starter("build", "reject", "--module", "host", "--commit", bad, "--reason", "edge-1 cannot take it", "--by", "alice")
	require.NoError(t, err, out)

	want := map[string][]string{
		gated:  {meshapi.EventPlanStarted, meshapi.EventPlanGated, meshapi.EventPlanConverged},
		halted: {meshapi.EventPlanStarted, meshapi.EventPlanHalted, meshapi.EventBuildRejected},
	}
	eventually(t, 2*time.Minute, "the halted plan's events delivered", func() bool { return len(rcv.events(halted)) >= 3 })
	// Every Notifier has ended: nothing more is coming.
	for plan := range want {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(t, s.c.GetWorkflow(ctx, meshapi.NotifierID("team", plan), "").Get(ctx, nil))
		cancel()
	}
	for plan, events := range want {
		require.Equal(t, events, rcv.events(plan), "events of %s, in order", plan)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	require.Empty(t, rcv.bad)
	require.Len(t, rcv.taken, 6, "each event taken once")
	tried := 0
	for _, b := range rcv.taken {
		tried += rcv.tries[b.ID]
	}
	require.Len(t, rcv.tries, 6, "every try carried the key of an event taken: the failed tries reused it")
	require.Equal(t, 9, tried, "three failed tries and one 200 per event, none after it")
	require.Equal(t, 4, rcv.tries[gated+"#1-plan_started"], "the first event tried three times while the receiver was down, under one key")
	for _, b := range rcv.taken {
		require.Equal(t, "host", b.Module)
		require.Equal(t, "http://fleet.example/", b.Links.Fleet)
		if b.Event == meshapi.EventPlanGated {
			require.Equal(t, "starter plan approve "+gated+" --tier 2", b.Command)
		}
		if b.Event == meshapi.EventPlanHalted {
			require.Contains(t, b.Reason, "edge-1")
		}
		if b.Event == meshapi.EventBuildRejected {
			require.Equal(t, halted+"#0-build_rejected", b.ID)
			require.Contains(t, b.Reason, "rejected by alice")
			require.Contains(t, b.Reason, "edge-1 cannot take it")
		}
	}
}

// TestCaptureNotifyHistories records the histories of the notifications
// path: a gated plan that hands its events over and converges, one that
// halts, and a Notifier that delivered after its target failed. Like the
// other captures it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureNotifyHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	rcv, url := newNotifyReceiver(t, 2)
	o := exampleMesh()
	o.push = "{retry_budget: 2s, running_timeout: 30s}"
	o.notify = fmt.Sprintf("{targets: {team: {kind: webhook, url: %q, secret: %q}}}", url, notifySecret)
	s := captureStack(t, o)
	_ = s.commit("mesh-controller")
	gated := s.startGated("host", s.commit("host"), 2)
	_, err := controlPlan(s, gated, meshapi.UpdateApprove, meshapi.ApproveInput{By: "capture"})
	require.NoError(t, err)
	require.Equal(t, meshapi.PlanConverged, s.wait(gated).State)
	eventually(t, 2*time.Minute, "the gated plan's events delivered", func() bool { return len(rcv.events(gated)) >= 3 })
	rcv.mu.Lock()
	rcv.downFor = 2 // the halted plan's Notifier records failed tries
	rcv.mu.Unlock()
	s.hosts["edge-1"].SetDown(true)
	halted := s.start("host", s.commit("host")).ID
	require.Equal(t, meshapi.PlanHalted, s.wait(halted).State)
	eventually(t, 2*time.Minute, "the halted plan's events delivered", func() bool { return len(rcv.events(halted)) >= 2 })
	for _, plan := range []string{gated, halted} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(t, s.c.GetWorkflow(ctx, meshapi.NotifierID("team", plan), "").Get(ctx, nil))
		cancel()
	}

	s.writeHistories(
		capturedRun{"plan-converged-gated-notified", gated, ""},
		capturedRun{"plan-halted-notified", halted, ""},
		capturedRun{"notifier-delivered-after-failures", meshapi.NotifierID("team", halted), ""},
	)
}

// troubledPlan starts a gated plan whose notify target is down (its
// receiver refuses every delivery; retry_first 1s, retry_max 2s), waits
// until `starter plan show` names the failing target, brings the receiver
// back and waits until the plan no longer names it, then approves the plan
// and waits for it and its Notifier to end. It returns the plan, and the
// Notifier's run that failed and told it.
func troubledPlan(t *testing.T, stackOf func(*testing.T, stackOptions) *stack) (*stack, string, string) {
	rcv, url := newNotifyReceiver(t, 1<<30)
	o := exampleMesh()
	o.notify = fmt.Sprintf("{targets: {team: {kind: webhook, url: %q, secret: %q, retry_first: 1s, retry_max: 2s}}}", url, notifySecret)
	s := stackOf(t, o)
	_ = s.commit("mesh-controller")
	gated := s.startGated("host", s.commit("host"), 2)
	var shown string
	eventually(t, time.Minute, "plan show to name the failing target", func() bool {
		shown, _ = s.starter("plan", "show", gated)
		return strings.Contains(shown, "notify target team failing since")
	})
	require.Regexp(t, `(?m)^notify target team failing since \d\d:\d\d:\d\d UTC: post event `+regexp.QuoteMeta(gated)+`#1-plan_started: .*503 Service Unavailable`, shown)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := s.c.DescribeWorkflow(ctx, meshapi.NotifierID("team", gated), "")
	require.NoError(t, err)

	rcv.mu.Lock()
	rcv.downFor = 0
	rcv.mu.Unlock()
	eventually(t, time.Minute, "plan show to drop the recovered target", func() bool {
		out, err := s.starter("plan", "show", gated)
		return err == nil && !strings.Contains(out, "notify target team")
	})
	_, err = controlPlan(s, gated, meshapi.UpdateApprove, meshapi.ApproveInput{By: "test"})
	require.NoError(t, err)
	require.Equal(t, meshapi.PlanConverged, s.wait(gated).State)
	eventually(t, time.Minute, "the plan's events delivered", func() bool { return len(rcv.events(gated)) >= 3 })
	require.NoError(t, s.c.GetWorkflow(ctx, meshapi.NotifierID("team", gated), "").Get(ctx, nil))
	return s, gated, d.WorkflowExecution.RunID
}

// TestPlanShowsAFailingNotifyTarget: a notify target that keeps failing is
// named in its running plan (plan show, the Web UI's details) until it
// takes the event, and its retry timings are the target's own.
func TestPlanShowsAFailingNotifyTarget(t *testing.T) {
	t.Parallel()
	troubledPlan(t, newStack)
}

// TestCaptureNotifyTroubleHistories records a Notifier that tells its plan
// of a failing target and of its recovery, and the plan told (change
// notify-trouble). Like the other captures it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureNotifyTroubleHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	s, gated, run := troubledPlan(t, captureStack)
	s.writeHistories(
		capturedRun{"plan-told-notify-trouble", gated, ""},
		capturedRun{"notifier-told-plan", meshapi.NotifierID("team", gated), run},
	)
}
