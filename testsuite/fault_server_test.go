package testsuite

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// The Temporal dev server stopped and started again on its database while
// pushes are in flight, twice in one plan: once when both tier-1 machines
// have taken their declarations and are starting them (two push activities
// waiting for running), once as the tier-2 declaration goes out. Each time
// the server stays down until the machines run what they were sent, so
// the push activities finish their work while the server cannot hear it.
// The plan converges, every machine applied its declaration once, and the
// worker process that lived through both restarts did it all.
func TestFaultServerRestartedMidPush(t *testing.T) {
	t.Parallel()
	o := stackOptions{faults: true, startDelay: 2 * time.Second,
		persist: true,
		modules: []string{"host"},
		machines: []machineSpec{
			{name: "e1", tier: 1, modules: []string{"host"}},
			{name: "e2", tier: 1, modules: []string{"host"}},
			{name: "control-node", tier: 2, modules: []string{"host"}},
		},
	}
	fs := newStack(t, o)
	fs.workers.start()

	tier1 := make(chan struct{})
	var answered atomic.Int32
	for _, m := range []string{"e1", "e2"} {
		fs.proxies[m].setHook(func(ev proxyEvent) proxyAction {
			if ev.Answer && ev.Status == 200 && answered.Add(1) == 2 {
				close(tier1)
			}
			return relay
		})
	}
	tier2 := make(chan struct{})
	var sent atomic.Bool
	fs.proxies["control-node"].setHook(func(ev proxyEvent) proxyAction {
		if ev.Decl != nil && !ev.Answer && sent.CompareAndSwap(false, true) {
			close(tier2)
		}
		return relay
	})

	id := fs.start("host", fs.commit("host")).ID
	restart := func(what string, ready <-chan struct{}, machines ...string) {
		t.Helper()
		select {
		case <-ready:
		case <-time.After(2 * time.Minute):
			t.Fatalf("the plan never got to %s; it is %s", what, fs.planState(id).State)
		}
		require.NoError(t, fs.srv.Stop())
		for _, m := range machines {
			eventually(t, time.Minute, m+" running what it was sent (the server down)", func() bool {
				rep := fs.hosts[m].Report()
				r, ok := rep.Running("host")
				return ok && r.Plan == id && r.State == mesh.StateRunning
			})
		}
		fs.srv.Restart(t)
		t.Logf("server restarted %s", what)
	}
	restart("with both tier-1 pushes in flight", tier1, "e1", "e2")
	restart("as the tier-2 declaration went out", tier2, "control-node")

	st := fs.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	var total faultTally
	for _, m := range []string{"e1", "e2", "control-node"} {
		fs.checkJournal(m)
		runsBuild(t, m, fs.hosts[m].Report(), *st.Build)
		tl := tallyJournal(t, m, fs.hosts[m].journal())
		require.Equal(t, 1, tl.applied, "%s applied its declaration once", m)
		total.add(tl)
	}
	require.Equal(t, 1, fs.workers.started, "one worker process lived through both restarts")
	t.Logf("server restarts: 2 with pushes in flight; applied %d, double applies %d, downgrades %d", total.applied, total.doubles, total.downgrades)
}
