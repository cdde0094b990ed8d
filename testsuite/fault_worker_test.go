package testsuite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// killPoint is where in a plan the worker process is SIGKILLed.
type killPoint struct {
	machine string
	// n kills on the proxy's n-th request of the round to machine (1: the
	// compose's report, 2: the push's report, 3: the declaration, 4: the
	// first report while waiting for health), before it is forwarded;
	// then relays it anyway (the agent acts for a dead worker) or drops it.
	n      int64
	relay  bool
	answer bool          // kills after the agent answered the declaration, before the answer is relayed (dropped)
	after  time.Duration // kills this long after the plan started (n and answer unset)
	desc   string
}

func (k killPoint) String() string { return k.desc }

// pickKill draws a kill point for a plan of module. Without soak it keeps
// to the push (the worker dies while a push activity runs, which its 20 s
// heartbeat timeout notices); the soak also kills during the compose and at
// random times (a build or compose attempt dies, noticed by its
// start-to-close timeout, a minute).
func pickKill(rng *rand.Rand, machines []string, soak bool) killPoint {
	m := machines[rng.IntN(len(machines))]
	kinds := 4
	if soak {
		kinds = 6
	}
	switch k := rng.IntN(kinds); k {
	case 0:
		return killPoint{machine: m, answer: true, desc: fmt.Sprintf("%s: after the agent answered the declaration, before the answer reached the worker", m)}
	case 1, 2, 3:
		n := int64(k + 1)
		relay := rng.IntN(2) == 0
		what := map[int64]string{2: "the push's report", 3: "the declaration", 4: "the first report while waiting for health"}[n]
		return killPoint{machine: m, n: n, relay: relay, desc: fmt.Sprintf("%s: on %s (request %d), then %s", m, what, n, map[bool]string{true: "relayed", false: "dropped"}[relay])}
	case 4:
		return killPoint{machine: m, n: 1, relay: rng.IntN(2) == 0, desc: fmt.Sprintf("%s: on the compose's report (request 1)", m)}
	default:
		d := time.Duration(rng.IntN(1500)) * time.Millisecond
		return killPoint{after: d, desc: fmt.Sprintf("%s after the plan started", d)}
	}
}

// SIGKILL of the worker process at seeded random points of plans, among
// them precisely between the agent's answer to a declaration and the
// worker hearing it; each time a new worker process takes over. Every plan
// ends converged, no request is applied twice by any agent, sequences only
// grow, no generation goes down, and every machine ends on the newest
// build of every module.
func TestFaultWorkerKilled(t *testing.T) {
	t.Parallel()
	faultWorkerKilled(t, "")
}

// The same kills with push.local_activity: a push runs inside the machine
// workflow's task, so a kill mid-push loses the task, and the worker that
// takes it over runs every push of it again; the guard must make each of
// them a no-op or the same push, never a second apply or a downgrade.
func TestFaultWorkerKilledLocalPush(t *testing.T) {
	t.Parallel()
	faultWorkerKilled(t, "{local_activity: true}")
}

// faultWorkerKilled is TestFaultWorkerKilled with the config's push:
// section set to push, if any.
func faultWorkerKilled(t *testing.T, push string) {
	seed := faultSeedFor(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6b696c6c))
	rounds := 2
	if *faultSoak {
		rounds = 10
	}
	o := exampleMesh()
	// Every push waits a second of health, so that a kill on the first
	// report after the declaration lands while the push waits for health:
	// the retry, on another worker, must wait it out again and apply
	// nothing twice.
	o.health = "{min_healthy: 1s}"
	o.push = push
	fs := newStack(t, withFaults(o))
	fs.workers.start()

	// Both modules run everywhere they should before the faults start.
	newest := map[string]mesh.Build{}
	for _, mod := range []string{"mesh-controller", "host"} {
		st := fs.wait(fs.start(mod, fs.commit(mod)).ID)
		require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
		newest[mod] = *st.Build
	}
	runsOn := map[string][]string{"host": {"edge-1", "control-node"}, "mesh-controller": {"control-node"}}

	var kills []string
	for round := range rounds {
		mod := []string{"host", "mesh-controller"}[rng.IntN(2)]
		k := pickKill(rng, runsOn[mod], *faultSoak)
		if round == 0 {
			// Always once, precisely: the agent has applied, the worker
			// never hears it.
			k = killPoint{machine: runsOn[mod][0], answer: true,
				desc: runsOn[mod][0] + ": after the agent answered the declaration, before the answer reached the worker"}
		}
		t.Logf("round %d: merge of %s, worker killed %s", round+1, mod, k)
		killed := make(chan struct{})
		var fired atomic.Bool
		for _, p := range fs.proxies {
			p.n.Store(0)
		}
		if k.machine != "" {
			fs.proxies[k.machine].setHook(func(ev proxyEvent) proxyAction {
				hit := (k.answer && ev.Answer) || (k.n > 0 && !ev.Answer && ev.N == k.n)
				if !hit || !fired.CompareAndSwap(false, true) {
					return relay
				}
				fs.workers.kill()
				close(killed)
				if k.answer || !k.relay {
					return drop
				}
				return relay
			})
		}
		id := fs.start(mod, fs.commit(mod)).ID
		if k.machine == "" {
			time.Sleep(k.after) // the fault's random moment, not a synchronisation
			fs.workers.kill()
			close(killed)
		}
		select {
		case <-killed:
		case <-time.After(2 * time.Minute):
			t.Fatalf("round %d: the kill point (%s) was never reached; plan %s is %s", round+1, k, id, fs.planState(id).State)
		}
		for _, p := range fs.proxies {
			p.setHook(nil)
		}
		start := time.Now()
		fs.workers.start()
		st := fs.wait(id)
		require.Equal(t, meshapi.PlanConverged, st.State, "round %d (%s): %s", round+1, k, st.Reason)
		newest[mod] = *st.Build
		kills = append(kills, fmt.Sprintf("%s (converged %.1fs after the new worker started)", k, time.Since(start).Seconds()))

		for machine, h := range fs.hosts {
			fs.checkJournal(machine)
			rep := h.Report()
			for m, machines := range runsOn {
				if slices.Contains(machines, machine) {
					runsBuild(t, machine, rep, newest[m])
				}
			}
		}
	}

	var total faultTally
	for machine, h := range fs.hosts {
		total.add(tallyJournal(t, machine, h.journal()))
	}
	require.Zero(t, total.doubles, "double applies")
	require.Zero(t, total.downgrades, "downgrades")
	require.Zero(t, total.badSeqs, "sequences not increasing")
	t.Logf("worker kills: %d (seed %d), worker processes %d, plans %d converged, 0 lost; applied %d, double applies %d, downgrades %d\n  %s",
		len(kills), seed, fs.workers.started, rounds+2, total.applied, total.doubles, total.downgrades, strings.Join(kills, "\n  "))
}
