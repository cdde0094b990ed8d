package testsuite

import (
	"math/rand/v2"
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
// declaration delivered late, in one of two ways chosen by the seed: at
// once, as attempt 1 wakes, when the agent
// acknowledges it as the exact repeat it is; or only after a newer plan has
// been applied to the machine (attempt 1 having given up on its answer
// meanwhile, as a client does on a packet the network delays), when the
// agent refuses it as a stale sequence. Either way the journal shows one
// apply for the request, the late one answered and not applied, and never
// two declarations in flight.
//
// The retry takes a minute or more, not 20 s: the frozen process's open
// long polls still take tasks from the server (a retry of the push, the
// machine workflow's next task), which then time out in their turn before
// the second worker gets them; a frozen worker is a worse fault than a
// dead one.
func TestFaultHeartbeatTimedOutAttemptOverlapsRetry(t *testing.T) {
	t.Parallel()
	fs := newStack(t, stackOptions{faults: true,
		modules:  []string{"host"},
		machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}},
	})
	seed := faultSeedFor(t)
	late := []string{"repeat", "stale"}[rand.New(rand.NewPCG(uint64(seed), 0x6c617465)).IntN(2)]
	t.Logf("the frozen attempt's declaration lands late as a %s", late)
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

	// Attempt 1 wakes.
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	want, applies := agent.OutcomeRepeat, 1
	if late == "stale" {
		// The machine moves on first: a newer plan is applied there, both
		// workers running, while attempt 1's declaration is still held
		// (its sender gives up on it meanwhile, as a client does on a
		// packet the network delays).
		st = fs.wait(fs.start("host", fs.commit("host")).ID)
		require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
		want, applies = agent.OutcomeRefused, 2
	}
	// Its declaration lands now.
	close(release)
	eventually(t, time.Minute, "the late declaration of attempt 1 reaching the agent ("+want+")", func() bool {
		for _, e := range h.journal() {
			if e.Outcome == want && e.Request == request {
				return true
			}
		}
		return false
	})
	outcomes := map[string]int{}
	for _, e := range h.journal() {
		if e.Request == request {
			outcomes[e.Outcome]++
			if e.Outcome == agent.OutcomeRefused {
				require.Equal(t, "sequence", e.Code, "the late declaration is refused as stale")
			}
		}
	}
	require.Equal(t, 1, outcomes[agent.OutcomeApplied], "request %s applied once: %v", request, outcomes)
	require.Equal(t, 1, outcomes[want], "the late attempt's declaration answered %s: %v", want, outcomes)
	require.Equal(t, 2, outcomes[agent.OutcomeApplied]+outcomes[want], "nothing else for the request: %v", outcomes)
	require.LessOrEqual(t, h.MaxInFlight(), 1, "two declarations in flight at the host")
	require.Len(t, h.Applied(), applies, "one apply per plan")
	runsBuild(t, "edge-1", h.Report(), *st.Build)
	tl := tallyJournal(t, "edge-1", h.journal())
	t.Logf("heartbeat-timed-out attempt frozen %.1fs, its retry converged the plan, its late declaration a %s; applied %d, double applies %d, max in flight %d",
		retried.Seconds(), late, tl.applied, tl.doubles, h.MaxInFlight())
}
