package testsuite

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// The fault suite extended to health (issue 13): real host agents (the
// host binary, exec runtime, real processes of images the plans build), the
// real worker binary, a real Temporal dev server; the faults are a host
// agent restarted while its tier bakes and a probe that flaps.

// flappingHealthServer is a build that serves GET /healthz on
// $MESHROLL_PORT and flaps: it answers %d probes 200, the next %d 500, and
// so on, each answer saying which probe it was. It counts probes, not time,
// so that however slowly a loaded box probes, no healthy stretch is longer
// than that many probes. With a trigger file named, it answers 200 until
// the file exists, and flaps from then on.
const flappingHealthServer = `package main

import (
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
)

func main() {
	fmt.Println(%q)
	if len(os.Args) > 1 && os.Args[1] == "version" {
		return
	}
	trigger, healthy, unhealthy := %q, int64(%d), int64(%d)
	var probes atomic.Int64
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if trigger != "" {
			if _, err := os.Stat(trigger); err != nil {
				fmt.Fprintln(w, "steady")
				return
			}
		}
		n := probes.Add(1) - 1
		if n%%(healthy+unhealthy) >= healthy {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "flapping: probe %%d unhealthy\n", n)
			return
		}
		fmt.Fprintf(w, "flapping: probe %%d healthy\n", n)
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("MESHROLL_PORT"), nil); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
`

// flapHealthy and flapUnhealthy are how many probes each stretch of
// flappingHealthServer lasts: with faultHealthProbe's 100ms interval a
// healthy stretch is about 300ms, far inside its min_healthy of 2s, and an
// unhealthy one 600ms, long enough for a reader of the report to see it
// (and what the probe last answered) on a loaded box.
const flapHealthy, flapUnhealthy = 3, 6

// faultHealthProbe is every module's health in these tests: an http probe
// on a port the agent picks, probed every 100ms, counted healthy after 2s
// without a break (a healthy stretch of flappingHealthServer would have to
// be stretched sixfold by a stalled prober to pass it).
const faultHealthProbe = "{http: {port: auto, path: /healthz}, interval: 100ms, timeout: 1s, min_healthy: 2s, deadline: 30s}"

// faultHealthProbeName is how a plan names faultHealthProbe.
const faultHealthProbeName = "http probe (GET :$MESHROLL_PORT/healthz)"

// healthFault is a stack with faults whose two machines run the host binary
// with the exec runtime: edge-1 in tier 1, control-node in tier 2, both
// running module host.
type healthFault struct {
	*stack
	// procs are the machines' host binaries (the stack's own agents are off).
	procs map[string]*hostProc
}

func newHealthFault(t *testing.T, tiers string) *healthFault {
	t.Helper()
	o := stackOptions{faults: true, noAgents: true,
		images:   true,
		modules:  []string{"host"},
		machines: hostFleet(1),
		health:   faultHealthProbe,
		tiers:    tiers,
	}
	fs := newStack(t, o)
	bin := filepath.Join(dsBuild(t, "host"), "host")
	hf := &healthFault{stack: fs, procs: map[string]*hostProc{}}
	for _, m := range o.machines {
		hf.procs[m.name] = newHostProc(t, bin, m.name, fs.regAddr, fs.proxies[m.name])
	}
	fs.workers.start()
	return hf
}

// plan merges src as module host and follows the plan to its end, which it
// must reach within stack.wait's bound: a plan that hangs fails the test.
func (hf *healthFault) plan(src string) meshapi.PlanState {
	hf.t.Helper()
	return hf.wait(hf.start("host", hf.commitSource("host", src)).ID)
}

// converged merges src and requires the plan to converge.
func (hf *healthFault) converged(src string) mesh.Build {
	hf.t.Helper()
	st := hf.plan(src)
	require.Equal(hf.t, meshapi.PlanConverged, st.State, st.Reason)
	return *st.Build
}

// journal is machine's whole journal, oldest first, from its agent's API.
func (hf *healthFault) journal(machine string) []agent.Entry {
	hf.t.Helper()
	return journalOver(hf.t, hf.procs[machine].client())
}

// checkJournals asserts the invariants every machine's journal keeps
// whatever happened: sequences only grow, nothing goes below the floor
// (a revert only back to it), and no request is applied twice.
func (hf *healthFault) checkJournals() {
	hf.t.Helper()
	for machine := range hf.procs {
		entries := hf.journal(machine)
		checkJournalEntries(hf.t, machine, entries)
		applied := map[string]uint64{}
		for _, e := range entries {
			if e.Outcome != agent.OutcomeApplied {
				continue
			}
			prev, twice := applied[e.Request]
			require.False(hf.t, twice, "%s: request %s applied twice (seq %d, then seq %d)", machine, e.Request, prev, e.Seq)
			applied[e.Request] = e.Seq
		}
	}
}

// untouched asserts plan id told machine nothing, and that it still runs
// b, healthy.
func (hf *healthFault) untouched(machine, id string, b mesh.Build) {
	hf.t.Helper()
	for _, e := range hf.journal(machine) {
		require.NotEqual(hf.t, id, e.Plan, "%s was told something by plan %s: %s entry %d", machine, id, e.Outcome, e.Index)
	}
	rep := hf.procs[machine].report()
	runsBuild(hf.t, machine, rep, b)
	r, _ := rep.Running("host")
	require.Equal(hf.t, mesh.HealthHealthy, r.Health, "%s's host", machine)
}

// waitBaking follows plan id until its tier 1 bakes (the plan's state
// says until when), and fails the test if the plan ends first. It allows
// three minutes, not planWait: the hosts run real images.
func (hf *healthFault) waitBaking(id string) {
	hf.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := plans.WaitUntil(ctx, hf.c, id, "tier 1 baking", func(st meshapi.PlanState) bool {
		return len(st.Tiers) > 0 && st.Tiers[0].BakeUntil != nil
	}, pollEvery)
	require.NoError(hf.t, err)
}

// floorRaised reports whether a host's journal says the host counted
// digest healthy for min_healthy, raising its floor to it.
func floorRaised(entries []agent.Entry, digest string) bool {
	for _, e := range entries {
		if e.Outcome == agent.OutcomeFloorRaised && len(e.Containers) == 1 && e.Containers[0].Digest == digest {
			return true
		}
	}
	return false
}

// A host agent restarted while its tier bakes: tier 1 (edge-1) has a bake
// of 20s and tier 2 (control-node) waits for it. Once the plan says tier 1
// bakes and the bake has read edge-1's report at least once, edge-1's agent
// is stopped (SIGTERM) and started again on its state directory; twice, by
// two plans: once while the bake reads edge-1 throughout, once while its
// reads of edge-1 are cut from the stop until the restarted agent reports
// the container healthy again (the bake reads now and then, and a slow
// network may hide a whole restart between two of its reads).
//
// What the code says happens: nothing an agent starts outlives it — the
// exec runtime stops its processes when the agent closes (and a SIGKILLed
// agent's die with it, by parent-death signal), and the agent, opening
// again, hands the last declaration to a new runtime, which starts the
// process anew (agent.Open). So the container restarts: it reports
// starting, then running with its health unknown and its restart count
// back at 0 (a new runtime counts afresh), then healthy with a new
// healthy_since. That is a break of the healthy stretch during the bake,
// and the bake fails the tier: the plan halts naming edge-1, tier 2
// untouched. Nothing is reverted: edge-1 had been healthy for min_healthy,
// its floor rose to the plan's build, and a revert goes back to the floor,
// never below it; the restarted container becomes healthy again on the
// plan's build, which the host journals, and nothing is applied again.
//
// Which face of the break the bake sees depends on when it reads (starting,
// health unknown, or healthy since a later moment); the plan's reason says
// which, and with the reads cut it can only be the last. The bake used to
// judge only the state, unhealthy and a rising restart count, so a restart
// that fell between its reads passed the bake.
func TestFaultHealthHostRestartedMidBake(t *testing.T) {
	t.Parallel()
	hf := newHealthFault(t, "{1: {bake: 20s}}")
	v1 := hf.converged(fmt.Sprintf(healthServer, "host v1", 200, 200))
	e1 := hf.procs["edge-1"]

	for i, round := range []struct {
		name   string
		hidden bool // the bake's reads of edge-1 fail while the agent restarts
	}{
		{name: "the bake reads edge-1 throughout"},
		{name: "the bake's reads miss the restart", hidden: true},
	} {
		version := fmt.Sprintf("host v%d", i+2)
		commit := hf.commitSource("host", fmt.Sprintf(healthServer, version, 200, 200))
		id := hf.start("host", commit).ID
		hf.waitBaking(id)

		// The bake has taken edge-1's report in (its baseline) once its
		// second read arrives: one bake's reads are sequential, and no one
		// else reads edge-1 through its proxy while the plan bakes.
		var reads atomic.Int64
		var cut atomic.Bool
		hf.proxies["edge-1"].setHook(func(ev proxyEvent) proxyAction {
			if ev.Method != http.MethodGet || ev.Path != host.PathReport {
				return relay
			}
			reads.Add(1)
			if cut.Load() {
				return drop
			}
			return relay
		})
		eventually(t, time.Minute, "the bake reading edge-1's report twice", func() bool { return reads.Load() >= 2 })
		require.False(t, hf.planState(id).State.Terminal(), "%s: the plan still bakes when the agent restarts", round.name)
		before, _ := e1.report().Running("host")
		require.Equal(t, mesh.HealthHealthy, before.Health)

		cut.Store(round.hidden)
		e1.stop()
		e1.start()
		var after mesh.RunningContainer
		eventually(t, time.Minute, "edge-1 healthy again after its agent restarted", func() bool {
			after, _ = e1.report().Running("host")
			return after.Health == mesh.HealthHealthy
		})
		hf.proxies["edge-1"].setHook(nil)

		st := hf.wait(id)
		t.Logf("%s: the plan's words: %s: %s", round.name, st.State, st.Reason)
		require.Equal(t, meshapi.PlanHalted, st.State, "%s: %s", round.name, st.Reason)
		bake := "tier 1 failed its bake of 20s, later tiers untouched: edge-1: host "
		if round.hidden {
			require.Equal(t, bake+fmt.Sprintf("broke its healthy stretch: healthy since %s when the bake began, since %s now "+
				"(it failed its probe or was started again in between)", before.HealthySince, after.HealthySince), st.Reason, round.name)
		} else {
			require.Regexp(t, "^"+regexp.QuoteMeta(bake)+`(is starting|is not healthy \(health unknown\)|broke its healthy stretch)`,
				st.Reason, "%s: the bake names edge-1 and the break", round.name)
		}
		require.Equal(t, meshapi.TierHalted, st.Tiers[0].State, round.name)
		require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "%s: tier 2 untouched", round.name)
		require.Equal(t, meshapi.MachineConverged, progress(st, "edge-1").State, "%s: edge-1's push had converged before the bake", round.name)
		require.Equal(t, meshapi.MachineSkipped, progress(st, "control-node").State, round.name)
		b := *st.Build

		// The agent's restart restarted the process: it printed its
		// version a second time, and runs on the plan's build, healthy.
		require.Equal(t, b.Digest, after.Digest, round.name)
		eventually(t, time.Minute, "edge-1's "+version+" process started twice", func() bool {
			return strings.Count(e1.containerLog("host"), version+"\n") == 2
		})

		entries := hf.journal("edge-1")
		var applied []string
		for _, e := range entries {
			if e.Outcome == agent.OutcomeApplied {
				applied = append(applied, e.Plan)
			}
			require.False(t, e.Revert, "%s: edge-1 is not reverted below its floor: entry %d (%s, seq %d) is a revert", round.name, e.Index, e.Outcome, e.Seq)
		}
		require.Len(t, applied, i+2, "%s: one declaration per plan; the restart applies nothing", round.name)
		require.Equal(t, id, applied[i+1], round.name)
		require.True(t, floorRaised(entries, b.Digest), "%s: edge-1's floor rose to the plan's build before the bake", round.name)

		hf.untouched("control-node", id, v1)
		hf.checkJournals()
	}
	t.Logf("edge-1's agent started %d times", e1.starts)
}

// A probe flapping from the start: the build's http probe answers 200 for
// three probes, then 500 for six, and so on, so it is healthy for about
// 300ms at a time, never for its min_healthy of 2s. The push never counts
// edge-1 healthy: it fails it at the first break after the first healthy
// report (activities/health.go: once healthy, a failed probe before
// min_healthy fails the push; the deadline is only for a build that is
// never seen healthy), puts edge-1 back on the build it ran before, and
// the plan halts naming the probe and what it last answered; tier 2 is
// untouched. The host never counted the flapping build healthy either:
// its floor never rose to it, so the revert is back to the floor, and no
// journal goes below one.
func TestFaultHealthProbeFlapping(t *testing.T) {
	t.Parallel()
	hf := newHealthFault(t, "")
	good := hf.converged(fmt.Sprintf(healthServer, "host good", 200, 200))

	commit := hf.commitSource("host", fmt.Sprintf(flappingHealthServer, "host flapping", "", flapHealthy, flapUnhealthy))
	id := hf.start("host", commit).ID
	st := hf.wait(id)
	t.Logf("the plan's words: %s: %s", st.State, st.Reason)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	require.True(t, strings.HasPrefix(st.Reason, "tier 1 halted, later tiers untouched: edge-1: "), st.Reason)
	require.Contains(t, st.Reason, "failed its "+faultHealthProbeName+" after", "failed at the first break, naming the probe")
	require.Regexp(t, `before 2s; last probe answered 500: flapping: probe \d+ unhealthy`, st.Reason, "and what it last answered")
	require.Contains(t, st.Reason, "put back on what it ran")
	require.Equal(t, meshapi.MachineFailed, progress(st, "edge-1").State)
	require.Equal(t, meshapi.MachineSkipped, progress(st, "control-node").State)
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "tier 2 untouched")
	flapping := *st.Build

	entries := hf.journal("edge-1")
	require.False(t, floorRaised(entries, flapping.Digest), "edge-1 never counted the flapping build healthy")
	require.True(t, floorRaised(entries, good.Digest))
	var ours []agent.Entry // what the plan applied on edge-1
	for _, e := range entries {
		if e.Outcome == agent.OutcomeApplied && e.Plan == id {
			ours = append(ours, e)
		}
	}
	require.Len(t, ours, 2, "the flapping build, then the revert")
	last := ours[1]
	require.True(t, last.Revert, "edge-1's last declaration is the revert")
	require.Equal(t, good.Digest, last.Containers[0].Digest, "back on the build it ran")
	require.Contains(t, last.Reason, faultHealthProbeName)
	eventually(t, time.Minute, "edge-1 healthy again on the good build", func() bool {
		r, ok := hf.procs["edge-1"].report().Running("host")
		return ok && r.Digest == good.Digest && r.Health == mesh.HealthHealthy
	})

	hf.untouched("control-node", id, good)
	hf.checkJournals()
}

// A probe that flaps during the bake: the build answers its probe 200
// until the test creates a trigger file, once the plan says tier 1 bakes,
// and flaps from then on (three probes 200, six 500, and so on). Its push
// counted it healthy (2s without a break) and its floor rose to it; the
// bake sees it turn unhealthy, or its healthy stretch break (which it sees
// first depends on when it reads), and fails the tier: the plan halts
// naming edge-1, and tier 2 keeps the build it ran. As with a restart in
// the bake, nothing is reverted below the floor the flapping build earned
// before it flapped.
func TestFaultHealthProbeFlappingDuringBake(t *testing.T) {
	t.Parallel()
	hf := newHealthFault(t, "{1: {bake: 20s}}")
	good := hf.converged(fmt.Sprintf(healthServer, "host good", 200, 200))

	trigger := filepath.Join(t.TempDir(), "flap")
	commit := hf.commitSource("host", fmt.Sprintf(flappingHealthServer, "host flaps later", trigger, flapHealthy, flapUnhealthy))
	id := hf.start("host", commit).ID
	hf.waitBaking(id)
	require.NoError(t, os.WriteFile(trigger, nil, 0o644))

	st := hf.wait(id)
	t.Logf("the plan's words: %s: %s", st.State, st.Reason)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	require.Regexp(t, regexp.MustCompile(`^tier 1 failed its bake of 20s, later tiers untouched: edge-1: host (turned unhealthy; `+
		`last probe answered 500: flapping: probe \d+ unhealthy|broke its healthy stretch)`), st.Reason)
	require.Equal(t, meshapi.TierHalted, st.Tiers[0].State)
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "tier 2 untouched")
	require.Equal(t, meshapi.MachineConverged, progress(st, "edge-1").State)
	require.Equal(t, meshapi.MachineSkipped, progress(st, "control-node").State)
	flaps := *st.Build

	entries := hf.journal("edge-1")
	require.True(t, floorRaised(entries, flaps.Digest), "the push counted it healthy, and the host raised its floor")
	for _, e := range entries {
		require.False(t, e.Revert, "nothing goes below the floor: entry %d (%s, seq %d) is a revert", e.Index, e.Outcome, e.Seq)
	}
	r, ok := hf.procs["edge-1"].report().Running("host")
	require.True(t, ok)
	require.Equal(t, flaps.Digest, r.Digest, "edge-1 keeps the build its floor rose to")

	hf.untouched("control-node", id, good)
	hf.checkJournals()
}
