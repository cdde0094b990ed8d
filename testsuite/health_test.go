package testsuite

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// exitsAfterTwoSeconds is a build that starts, prints its version, runs for
// two seconds and exits 1: the commoner road to the 2026-10-02 outage.
const exitsAfterTwoSeconds = `package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	fmt.Println(%q)
	if len(os.Args) > 1 && os.Args[1] == "version" {
		return
	}
	time.Sleep(2 * time.Second)
	fmt.Println("giving up")
	os.Exit(1)
}
`

// healthServer is a build that serves GET /healthz on $MESHROLL_PORT,
// answering with the status it was built with.
const healthServer = `package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	fmt.Println(%q)
	if len(os.Args) > 1 && os.Args[1] == "version" {
		return
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(%d)
		fmt.Fprintln(w, "status %d")
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("MESHROLL_PORT"), nil); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
`

// A bad build stops at its first machine (issue 13), on real host agents
// running real processes: tier 1's two machines are pushed one at a time;
// the build fails on the first, which is put back on the build it ran, the
// plan halts saying why, and the second machine and tier 2 are untouched.
func TestBadBuildStopsAtItsFirstBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []badBuildCase{
		{
			name:   "a build that exits two seconds in",
			health: "{min_healthy: 3s, deadline: 1m}",
			good:   func(v string) string { return fmt.Sprintf(exampleProgram, v) },
			bad:    func(v string) string { return fmt.Sprintf(exitsAfterTwoSeconds, v) },
			why:    "is exited",
			// The engine restarts it (restart policy on-failure): the
			// push sees the restart counted, or the container crash-looping.
			dockerWhy: "restarted",
		},
		{
			name:   "an http probe that answers 500",
			health: "{http: {port: auto, path: /healthz}, interval: 200ms, min_healthy: 1s, deadline: 15s}",
			good:   func(v string) string { return fmt.Sprintf(healthServer, v, 200, 200) },
			bad:    func(v string) string { return fmt.Sprintf(healthServer, v, 500, 500) },
			why:    "http probe (GET :$MESHROLL_PORT/healthz)",
		},
	} {
		for _, docker := range []bool{false, true} {
			name := tc.name
			if docker {
				name = "on docker: " + tc.name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				badBuildStopsAtItsFirstBatch(t, tc, docker)
			})
		}
	}
}

// badBuildCase is one way a build goes bad in TestBadBuildStopsAtItsFirstBatch.
type badBuildCase struct {
	name      string
	health    string
	good, bad func(version string) string
	why       string // in the plan's reason
	// dockerWhy, when set, is why on docker.
	dockerWhy string
}

// badBuildStopsAtItsFirstBatch runs tc with the agents on the exec
// runtime, or on docker.
func badBuildStopsAtItsFirstBatch(t *testing.T, tc badBuildCase, docker bool) {
	o := execHostMesh(hostFleet(2))
	if docker {
		o.exec, o.docker = false, true
		tc.why = cmp.Or(tc.dockerWhy, tc.why)
	}
	o.tiers = "{1: {max_parallel: 1}}"
	o.health = tc.health
	s := newStack(t, o)

	good := s.commitSource("host", tc.good("host good"))
	s.converge("host", good)
	goodBuild := s.build("host", good)
	before := map[string]int{}
	for m, h := range s.hosts {
		before[m] = len(h.Applied())
	}

	bad := s.commitSource("host", tc.bad("host bad"))
	id := s.start("host", bad).ID
	st := s.wait(id)
	t.Logf("the plan's words: %s: %s", st.State, st.Reason)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	require.Contains(t, st.Reason, "tier 1 halted: 1 of its 2 machines failed")
	require.Contains(t, st.Reason, "its 1 machine not yet pushed and later tiers untouched")
	require.Contains(t, st.Reason, tc.why)
	require.Contains(t, st.Reason, "put back on what it ran")
	badBuild := s.build("host", bad)
	require.Contains(t, st.Reason, fmt.Sprintf("host generation %d (%s) ", badBuild.Generation, mesh.ShortDigest(badBuild.Digest)),
		"the failure names the build as a person reads it")
	e1, _ := st.Machine("edge-1")
	require.Equal(t, meshapi.MachineFailed, e1.State)
	e2, _ := st.Machine("edge-2")
	require.Equal(t, meshapi.MachineSkipped, e2.State, "the second machine of the tier is never pushed")
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "tier 2 untouched")

	s.runs("edge-1", goodBuild)
	applied := s.hosts["edge-1"].Applied()
	require.Len(t, applied, before["edge-1"]+2, "the bad build, then the revert")
	revert := applied[len(applied)-1]
	c, _ := revert.Container("host")
	require.Equal(t, goodBuild.Digest, c.Digest, "the revert is the build it ran before")
	require.True(t, revert.Revert, "journalled as a revert")
	require.Equal(t, id, revert.Plan, "naming the plan")
	require.Contains(t, revert.Reason, tc.why, "and the failure")
	s.checkJournal("edge-1") // one writer, growing sequences, nothing below the floor
	for _, m := range []string{"edge-2", "control-node"} {
		require.Len(t, s.hosts[m].Applied(), before[m], "%s was told nothing", m)
		s.runs(m, goodBuild)
	}

	out, err := s.starter("plan", "show", id)
	require.NoError(t, err, out)
	require.Contains(t, out, "halted")
	require.True(t, strings.Contains(out, "put back on what it ran"), "plan show says why:\n%s", out)

	// status names the failed plan as the one that put edge-1 back,
	// not as the one that brought what runs.
	sj, err := s.status("--machine", "edge-1")
	require.NoError(t, err)
	row := sj.byKey()["edge-1/host"]
	require.Equal(t, goodBuild.Generation, *row.Generation)
	require.Equal(t, id, row.Plan)
	require.True(t, row.PutBack, "status marks the put-back: %+v", row)
	out, err = s.starter("status", "--machine", "edge-1")
	require.NoError(t, err, out)
	require.Contains(t, out, meshapi.PlanID("host", mesh.ShortCommit(bad))+" (put back)", out)
}

// With max_parallel 1, no two machines of a tier are ever between their
// declaration and their floor rising (healthy for min_healthy) at once, as
// the hosts' own journals tell it: each machine's window, from the applied
// entry to the floor-raised entry, ends before the next machine's begins.
func TestMaxParallelOneNeverOverlapsInTheJournals(t *testing.T) {
	t.Parallel()
	o := exampleMesh()
	o.modules = []string{"host"}
	o.machines = hostFleet(3)
	o.tiers = "{1: {max_parallel: 1}}"
	o.health = "{min_healthy: 1s}"
	s := newStack(t, o)
	h1 := s.commit("host")
	id := s.converge("host", h1).Plan

	var ws []window
	for _, m := range []string{"edge-1", "edge-2", "edge-3"} {
		ws = append(ws, s.windowOf(m, id))
	}
	slices.SortFunc(ws, func(a, b window) int { return a.start.Compare(b.start) })
	for i := 1; i < len(ws); i++ {
		require.False(t, ws[i].start.Before(ws[i-1].end),
			"%s was declared at %s, before %s had been healthy for min_healthy (%s)",
			ws[i].machine, ws[i].start.Format(time.RFC3339Nano), ws[i-1].machine, ws[i-1].end.Format(time.RFC3339Nano))
	}
}

// The amnesia case of issue 13: a host plan held at its gate was composed
// with controller k1; controller k2 then rolled out to the control node;
// the control node's agent lost its state (a replaced disk) and came back
// empty; the held plan, approved, must send the control node controller k2,
// from the fleet's own record of its floor, never the k1 it recorded, and
// say that the host lost its state: in the plan's words, the machine
// workflow's state, and the host's new journal. On docker the containers
// outlive the agent: the new agent finds them by their labels, reports them
// and keeps them (the same containers, not restarted) until the plan's
// declaration, which keeps controller k2's container as it runs.
func TestAHostThatLostItsStateIsNotTakenBelowItsFloor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		runtime string
		o       stackOptions
	}{
		{"noop", exampleMesh()},
		{"docker", dockerMesh()},
	} {
		t.Run("on "+tc.runtime, func(t *testing.T) {
			t.Parallel()
			lostStateNotBelowFloor(t, tc.o)
		})
	}
}

func lostStateNotBelowFloor(t *testing.T, o stackOptions) {
	s := newStack(t, o)
	h1, h2, k1, k2, held := s.staleHostPlan()
	s.runs("control-node", s.build("mesh-controller", k2), s.build("host", h1))
	var before engineInspect
	if o.docker {
		before = s.dockerRuns("control-node", s.build("mesh-controller", k2))
	}

	cn := s.hosts["control-node"]
	cn.forget()
	rep := cn.Report()
	require.Zero(t, rep.LastSeq, "the agent came back with no state")
	if o.docker {
		// What runs is found by label and reported, as declared.
		require.Len(t, rep.Containers, 2, "the agent found what runs: %+v", rep.Containers)
		for _, b := range []mesh.Build{s.build("mesh-controller", k2), s.build("host", h1)} {
			r, ok := rep.Running(b.Module)
			require.True(t, ok, "it reports %s", b.Module)
			require.Equal(t, b.Digest, r.Digest, "%s as it runs", b.Module)
		}
		found := cn.journal()[0]
		require.Equal(t, agent.OutcomeFound, found.Outcome, "its new journal starts with what it found")
		require.Contains(t, found.Reason, "no state")
		after := s.dockerRuns("control-node", s.build("mesh-controller", k2))
		require.Equal(t, before.ID, after.ID, "the controller's container is the one that ran")
		require.Equal(t, before.State.StartedAt, after.State.StartedAt, "not restarted")
	} else {
		require.Empty(t, rep.Containers, "the agent came back with nothing")
	}

	_, err := controlPlan(s, held, meshapi.UpdateApprove, meshapi.ApproveInput{By: "amnesia test"})
	require.NoError(t, err)
	st := s.wait(held)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	s.runs("control-node", s.build("mesh-controller", k2), s.build("host", h2))
	if o.docker {
		after := s.dockerRuns("control-node", s.build("mesh-controller", k2))
		require.Equal(t, before.ID, after.ID, "the plan's declaration kept the controller's container")
		require.Equal(t, before.State.StartedAt, after.State.StartedAt, "not restarted")
		s.dockerRuns("control-node", s.build("host", h2))
	}

	applied := cn.Applied()
	require.Len(t, applied, 1, "one declaration since it forgot")
	for _, c := range applied[0].Containers {
		require.NotEqual(t, s.build("mesh-controller", k1).Digest, c.Digest, "the held plan's controller is never sent")
	}
	require.Contains(t, applied[0].Reason, "lost its state", "the host's new journal says why it starts anew")
	m, _ := st.Machine("control-node")
	require.Contains(t, m.Reason, "lost its state", "the plan says so")
	require.Contains(t, m.Rebased, "mesh-controller")
	s.checkJournal("control-node")

	// The push answers the plan itself, so the plan can end before the
	// machine workflow has taken the push's outcome in: wait for it.
	var ms meshapi.MachineState
	eventually(t, 30*time.Second, "the machine workflow's state to record the lost state", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		ms, err = plans.MachineState(ctx, s.c, "control-node")
		return err == nil && ms.HostLostState != ""
	})
	require.Contains(t, ms.HostLostState, "lost its state", "and the machine workflow's state")
	require.Equal(t, s.build("mesh-controller", k2).Digest, ms.Floor["mesh-controller"].Digest, "whose floor holds controller k2")
}

// probedProgram is a build that runs until stopped and answers its own exec
// probe ("probe" as its argument): healthy unless a file named after its
// machine ($MESHROLL_MACHINE) is in the marks directory it was built with,
// so that one build can fail its probe on chosen machines only. Built with
// marks "" it never fails.
const probedProgram = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	fmt.Println(%q)
	marks := %q
	switch {
	case len(os.Args) > 1 && os.Args[1] == "version":
		return
	case len(os.Args) > 1 && os.Args[1] == "probe":
		machine := os.Getenv("MESHROLL_MACHINE")
		if _, err := os.Stat(filepath.Join(marks, machine)); marks != "" && err == nil {
			fmt.Println("marked bad on", machine)
			os.Exit(3)
		}
		fmt.Println("fine on", machine)
		return
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	<-term
}
`

// max_failed 1 of a tier of 4, with an exec probe judged by the real host
// agents (issue 13): one machine failing its probe is put back on what it
// ran and the plan goes on and converges naming it; two failing halt the
// plan at tier 1, the control node untouched.
func TestMaxFailedOneOfFourWithAnExecProbe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		failing []string
		state   meshapi.PlanStatus
		words   string
	}{
		{"one fails: reverted, the plan converges naming it", []string{"edge-2"}, meshapi.PlanConverged,
			"failed within their tier's budget and put back on what they ran (1): edge-2: "},
		{"two fail: the plan halts", []string{"edge-2", "edge-3"}, meshapi.PlanHalted,
			"tier 1 halted: 2 of its 4 machines failed, more than the 1 it may lose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := execHostMesh(hostFleet(4))
			o.tiers = "{1: {max_failed: 1}}"
			// A deadline that a healthy build meets on a loaded box (the
			// suite's tests run side by side): the failing machines wait it
			// out, the others are healthy a second after they start.
			o.health = "{exec: [/app/host, probe], interval: 200ms, min_healthy: 1s, deadline: 15s}"
			s := newStack(t, o)

			good := s.commitSource("host", fmt.Sprintf(probedProgram, "host good", ""))
			s.converge("host", good)
			goodBuild := s.build("host", good)
			marks := t.TempDir()
			for _, m := range tc.failing {
				require.NoError(t, os.WriteFile(filepath.Join(marks, m), nil, 0o644))
			}
			bad := s.commitSource("host", fmt.Sprintf(probedProgram, "host marked", marks))
			id := s.start("host", bad).ID
			st := s.wait(id)
			t.Logf("the plan's words: %s: %s", st.State, st.Reason)
			require.Equal(t, tc.state, st.State, st.Reason)
			require.Contains(t, st.Reason, tc.words)
			badBuild := s.build("host", bad)
			for _, m := range tc.failing {
				require.Contains(t, st.Reason, m+": machine "+m+" did not report", "the plan names %s", m)
				require.Contains(t, st.Reason, "exec probe (/app/host probe); last probe exited 3: host marked / marked bad on "+m,
					"and the probe with its output, on one line")
				ms, _ := st.Machine(m)
				require.Equal(t, meshapi.MachineFailed, ms.State)
				s.runs(m, goodBuild)
				applied := s.hosts[m].Applied()
				revert := applied[len(applied)-1]
				require.True(t, revert.Revert, "%s's last declaration is the revert", m)
				c, _ := revert.Container("host")
				require.Equal(t, goodBuild.Digest, c.Digest, "back on the build it ran")
			}
			for _, m := range []string{"edge-1", "edge-4"} {
				s.runs(m, badBuild) // healthy where not marked
			}
			if tc.state == meshapi.PlanConverged {
				s.runs("control-node", badBuild)
			} else {
				s.runs("control-node", goodBuild)
				require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "tier 2 untouched")
			}
			for m := range s.hosts {
				s.checkJournal(m)
			}
		})
	}
}
