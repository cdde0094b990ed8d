package testsuite

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/secret"
)

// A registry that asks who is there (docs/registry.md): the builder pushes
// with the worker's credential and the host agents pull with the hosts'
// pull-only one, on the exec runtime and on the real engine (which the
// docker runtime hands it as X-Registry-Auth); a merge converges on every
// machine. Without the credential a pull is answered 401 and the push
// fails.
func TestARegistryThatAsksForCredentials(t *testing.T) {
	t.Parallel()
	access := registry.Access{
		Push: registry.Credential{Username: "worker", Password: secret.String("push-" + t.Name())},
		Pull: registry.Credential{Username: "hosts", Password: secret.String("pull-" + t.Name())},
	}
	exec := imageMesh()
	exec.exec = true
	for _, tc := range []struct {
		runtime string
		o       stackOptions
	}{
		{"exec", exec},
		{"docker", dockerMesh()},
	} {
		t.Run("on "+tc.runtime, func(t *testing.T) {
			t.Parallel()
			o := tc.o
			o.registryAccess = access
			s := newStack(t, o)
			st := s.converge("host", s.commit("host"))
			s.everywhere(*st.Build)
		})
	}
}

// A host agent on docker whose pull credential is wrong (docs/registry.md;
// issue 26, pull failures are clear): edge-1's agent is restarted with a
// wrong password, and the next merge's push to it fails with one line that
// names the image and the cause. Nothing else changes: edge-1 keeps running
// the build it ran, in the same container, never restarted; the plan halts
// at edge-1, so edge-2 and the control node are told nothing.
func TestDockerAWrongPullCredentialFailsThatPushAlone(t *testing.T) {
	t.Parallel()
	o := dockerMesh()
	o.modules, o.controlPlane, o.machines = []string{"host"}, nil, hostFleet(2)
	o.tiers = "{1: {max_parallel: 1}}"
	o.registryAccess = registry.Access{
		Push: registry.Credential{Username: "worker", Password: secret.String("push-" + t.Name())},
		Pull: registry.Credential{Username: "hosts", Password: secret.String("pull-" + t.Name())},
	}
	s := newStack(t, o)
	first := *s.converge("host", s.commit("host")).Build
	before := map[string]engineInspect{}
	applied := map[string]int{}
	for m, h := range s.hosts {
		before[m] = s.dockerRuns(m, first)
		applied[m] = len(h.Applied())
	}

	wrong := s.pullRegistry()
	wrong.Password = secret.String("not-the-pull-password")
	socket := os.Getenv(envDockerSocket)
	edge := s.hosts["edge-1"]
	edge.runtime = func(dir string) agent.Runtime {
		rt, err := agent.NewRuntime(agent.RuntimeDocker, agent.RuntimeOptions{
			Machine: s.engineName("edge-1"), DockerSocket: socket, StateDir: dir, Registry: wrong,
		})
		require.NoError(t, err)
		return rt
	}
	edge.restart()

	commit := s.commit("host")
	st := s.wait(s.start("host", commit).ID)
	t.Logf("the plan's words: %s: %s", st.State, st.Reason)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	next := s.build("host", commit)
	e1, _ := st.Machine("edge-1")
	require.Equal(t, meshapi.MachineFailed, e1.State)
	t.Logf("edge-1: %s", e1.Reason)
	require.Contains(t, e1.Reason, "pull "+next.Image+"@"+next.Digest+": ", "the failure names the image")
	require.Contains(t, e1.Reason, "the registry asks for credentials this host did not give or got wrong", "and the cause")
	require.NotContains(t, e1.Reason, "\n", "in one line")
	require.Contains(t, st.Reason, "the registry asks for credentials", "the plan's words carry the cause")

	after := s.dockerRuns("edge-1", first)
	require.Equal(t, before["edge-1"].ID, after.ID, "edge-1 keeps the container it ran")
	require.Equal(t, before["edge-1"].State.StartedAt, after.State.StartedAt, "not restarted")
	s.runs("edge-1", first)
	s.checkJournal("edge-1")
	for _, m := range []string{"edge-2", "control-node"} {
		require.Len(t, s.hosts[m].Applied(), applied[m], "%s was told nothing", m)
		is := s.dockerRuns(m, first)
		require.Equal(t, before[m].ID, is.ID, "%s keeps its container", m)
		require.Equal(t, before[m].State.StartedAt, is.State.StartedAt, "%s: not restarted", m)
	}
}
