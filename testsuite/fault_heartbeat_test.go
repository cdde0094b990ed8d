package testsuite

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// A push attempt whose heartbeat timed out but which is still alive, for
// real, overlapping its retry: the worker process running attempt 1 is
// frozen (SIGSTOP) just as its declaration reaches the proxy in front of
// the agent, which holds the declaration. Past the push's 20 s heartbeat
// timeout the server retries the push on a second worker process; attempt
// 2 reads the report, sends the same declaration, which the agent applies,
// and the plan converges. Then attempt 1 is let go (SIGCONT) and its
// declaration delivered late: the agent acknowledges it as the exact
// repeat it is and applies nothing. The journal shows one apply and one
// repeat for the request, never two declarations in flight at once.
//
// The retry takes a minute or more, not 20 s: the frozen process's open
// long polls still take tasks from the server (a retry of the push, the
// machine workflow's next task), which then time out in their turn before
// the second worker gets them; a frozen worker is a worse fault than a
// dead one.
func TestFaultHeartbeatTimedOutAttemptOverlapsRetry(t *testing.T) {
	t.Parallel()
	fs := newFaultStack(t, faultStackOptions{stackOptions: stackOptions{
		modules:  []string{"host"},
		machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}},
	}})
	a := fs.workers.start()

	held := make(chan string, 1)
	release := make(chan struct{})
	var first atomic.Bool
	fs.proxies["edge-1"].setHook(func(ev proxyEvent) proxyAction {
		if ev.Decl == nil || ev.Answer || !first.CompareAndSwap(false, true) {
			return relay
		}
		// Attempt 1's declaration: freeze its worker and hold it.
		_ = a.cmd.Process.Signal(syscall.SIGSTOP)
		held <- ev.Decl.Request
		<-release
		return relay
	})
	id := fs.start("host", fs.commit("host")).ID
	var request string
	select {
	case request = <-held:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the plan never sent its declaration; it is %s", fs.planState(id).State)
	}
	frozen := time.Now()
	fs.workers.startAlongside()

	st := fs.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	retried := time.Since(frozen)
	require.Greater(t, retried, 20*time.Second, "the retry came after the heartbeat timeout")
	h := fs.hosts["edge-1"]
	require.Len(t, h.Applied(), 1, "the retry's declaration applied")

	// Attempt 1 wakes and its declaration lands now.
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	close(release)
	pollUntil(t, time.Minute, "the late declaration of attempt 1 reaching the agent", func() bool {
		for _, e := range h.journal() {
			if e.Outcome == agent.OutcomeRepeat && e.Request == request {
				return true
			}
		}
		return false
	})
	outcomes := map[string]int{}
	for _, e := range h.journal() {
		if e.Request == request {
			outcomes[e.Outcome]++
		}
	}
	require.Equal(t, 1, outcomes[agent.OutcomeApplied], "request %s applied once: %v", request, outcomes)
	require.Equal(t, 1, outcomes[agent.OutcomeRepeat], "the late attempt's declaration acknowledged as a repeat: %v", outcomes)
	require.Zero(t, outcomes[agent.OutcomeRefused], "%v", outcomes)
	require.LessOrEqual(t, h.MaxInFlight(), 1, "two declarations in flight at the host")
	runsBuild(t, "edge-1", h.Report(), *st.Build)
	tl := tallyJournal(t, "edge-1", h.journal())
	t.Logf("heartbeat-timed-out attempt frozen %.1fs, its retry converged the plan, its late declaration a repeat; applied %d, double applies %d, max in flight %d",
		retried.Seconds(), tl.applied, tl.doubles, h.MaxInFlight())
}
