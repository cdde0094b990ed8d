package testsuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// A host agent on docker SIGKILLed while its tier bakes, and started again
// on its state directory: the real host binary with --runtime docker on the
// test engine, the real worker binary. The container outlives the agent
// (same ID, start time and restart count); the new agent adopts it, and,
// once its first probe passes, reports it healthy since the moment the
// killed agent saw it healthy, since it is that very container, never
// restarted. So the bake sees no break, the plan converges on both tiers,
// and nothing is applied twice. (On exec the same kill restarts the
// process, and the bake halts the plan: TestFaultHealthHostRestartedMidBake.)
func TestDockerAgentKilledMidBakeThePlanGoesOn(t *testing.T) {
	t.Parallel()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	edge, cn := "edge-"+suffix, "control-"+suffix
	machines := []machineSpec{{name: edge, tier: 1, modules: []string{"host"}}, {name: cn, tier: 2, modules: []string{"host"}}}
	s, e, procs := dockerHostStack(t, stackOptions{faults: true, noAgents: true, images: true, docker: true,
		modules: []string{"host"}, machines: machines, health: faultHealthProbe, tiers: "{1: {bake: 20s}}"})
	inspect := func(machine string) engineInspect { return e.inspectOne(t, machine) }

	first := s.wait(s.start("host", s.commitSource("host", fmt.Sprintf(healthServer, "host v1", 200, 200))).ID)
	require.Equal(t, meshapi.PlanConverged, first.State, first.Reason)
	id := s.start("host", s.commitSource("host", fmt.Sprintf(healthServer, "host v2", 200, 200))).ID
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := plans.WaitUntil(ctx, s.c, id, "tier 1 baking", func(st meshapi.PlanState) bool {
		return len(st.Tiers) > 0 && st.Tiers[0].BakeUntil != nil
	}, pollEvery)
	require.NoError(t, err)
	before, _ := procs[edge].report().Running("host")
	require.Equal(t, mesh.HealthHealthy, before.Health)
	was := inspect(edge)

	procs[edge].kill()
	procs[edge].start()
	var after mesh.RunningContainer
	eventually(t, time.Minute, edge+" healthy again after its agent was killed", func() bool {
		after, _ = procs[edge].report().Running("host")
		return after.Health == mesh.HealthHealthy
	})
	require.Equal(t, before.HealthySince, after.HealthySince, "healthy since the killed agent saw it healthy: the same container, never restarted")
	is := inspect(edge)
	require.Equal(t, was.ID, is.ID, "the same container")
	require.Equal(t, was.State.StartedAt, is.State.StartedAt, "not restarted")
	require.Equal(t, was.RestartCount, is.RestartCount)

	st := s.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	for _, m := range machines {
		entries := journalOver(t, procs[m.name].client())
		checkJournalEntries(t, m.name, entries)
		applied := map[string]bool{}
		for _, en := range entries {
			if en.Outcome == agent.OutcomeApplied {
				require.False(t, applied[en.Request], "%s: request %s applied twice", m.name, en.Request)
				applied[en.Request] = true
			}
		}
		require.Len(t, applied, 2, "%s: one declaration per plan", m.name)
		runsBuild(t, m.name, procs[m.name].report(), *st.Build)
	}
}

// The real host binary with --runtime docker stopped by SIGTERM, as a
// service manager stops it for an upgrade, and started again on its state
// directory, on every machine: it exits cleanly, and leaves its container
// running while it is down; the agent started again adopts the very same
// container (same ID, start time and restart count), reports it running
// without applying anything again, and the next merge rolls on.
func TestDockerAgentStoppedBySIGTERMKeepsItsContainers(t *testing.T) {
	t.Parallel()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	machines := []machineSpec{{name: "edge-" + suffix, tier: 1, modules: []string{"host"}}, {name: "control-" + suffix, tier: 2, modules: []string{"host"}}}
	s, e, procs := dockerHostStack(t, stackOptions{faults: true, noAgents: true, images: true, docker: true, modules: []string{"host"}, machines: machines})
	inspect := func(machine string) engineInspect { return e.inspectOne(t, machine) }

	first := s.wait(s.start("host", s.commit("host")).ID)
	require.Equal(t, meshapi.PlanConverged, first.State, first.Reason)
	for _, m := range machines {
		p := procs[m.name]
		was := inspect(m.name)
		require.True(t, was.State.Running)
		applied := len(journalOver(t, p.client()))

		p.stop()
		require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "%s: the agent stops cleanly on SIGTERM", m.name)
		down := inspect(m.name)
		require.Equal(t, was.ID, down.ID, "%s: the container stays while its agent is down", m.name)
		require.True(t, down.State.Running, "%s: and runs", m.name)

		p.start()
		eventually(t, time.Minute, m.name+" reports its container running again", func() bool {
			r, ok := p.report().Running("host")
			return ok && r.State == mesh.StateRunning && r.Digest == first.Build.Digest
		})
		is := inspect(m.name)
		require.Equal(t, was.ID, is.ID, "%s: the same container", m.name)
		require.Equal(t, was.State.StartedAt, is.State.StartedAt, "%s: not restarted", m.name)
		require.Equal(t, was.RestartCount, is.RestartCount, "%s: not restarted", m.name)
		entries := journalOver(t, p.client())
		for _, en := range entries[applied:] {
			require.NotEqual(t, agent.OutcomeApplied, en.Outcome, "%s: nothing applied again on its restart", m.name)
		}
	}

	next := s.wait(s.start("host", s.commit("host")).ID)
	require.Equal(t, meshapi.PlanConverged, next.State, next.Reason)
	for _, m := range machines {
		entries := journalOver(t, procs[m.name].client())
		checkJournalEntries(t, m.name, entries)
		runsBuild(t, m.name, procs[m.name].report(), *next.Build)
	}
}

// dockerHostStack stands up o's stack with the real host binary, --runtime
// docker on the test engine, for each of o's machines (their names this
// test's own: the binary labels containers with its machine, and the engine
// is shared), and starts the workers; on the bridge engine with o.bridge.
// The machines' containers are removed once their agents stop.
func dockerHostStack(t *testing.T, o stackOptions) (*stack, engine, map[string]*hostProc) {
	t.Helper()
	socket := dockerSocket(t)
	if o.bridge {
		socket = dockerBridgeSocket(t)
	}
	e := engine{socket: socket}
	s := newStack(t, o)
	bin := filepath.Join(dsBuild(t, "host"), "host")
	procs := map[string]*hostProc{}
	for _, m := range o.machines {
		t.Cleanup(func() { e.removeAll(t, m.name) }) // after the agent stops (cleanups run last first)
		procs[m.name] = newHostProc(t, bin, m.name, s.regAddr, s.proxies[m.name], "--runtime", "docker", "--docker-socket", socket)
	}
	s.workers.start()
	return s, e, procs
}

// inspectOne is the engine's inspection of the one container it runs for
// machine.
func (e engine) inspectOne(t *testing.T, machine string) engineInspect {
	t.Helper()
	cs := e.containers(t, machine)
	require.Len(t, cs, 1, "%s runs one container", machine)
	var in engineInspect
	require.NoError(t, e.get("/containers/"+cs[0].ID+"/json", &in))
	in.ID = cs[0].ID
	return in
}
