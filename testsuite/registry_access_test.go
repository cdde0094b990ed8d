package testsuite

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/mesh"
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

// A pull that fails on the real engine (issue 26, pull failures are clear)
// fails that machine's push alone, in one line naming the image and the
// cause: a wrong pull credential (edge-1's agent restarted with a wrong
// password), the image not in the registry (its manifest deleted), and the
// registry down. Each breaks while the plan, built and composed, waits at
// its gate before tier 1. Nothing else changes: edge-1 keeps running the
// build it ran, in the same container, never restarted; the plan halts at
// edge-1, so edge-2 and the control node are told nothing.
func TestDockerAPullThatFailsFailsThatPushAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		access registry.Access
		cause  string
		// retried is a pull tried again until the push gives up.
		retried bool
		// breakPull makes edge-1's pull of next fail.
		breakPull func(t *testing.T, s *stack, next mesh.Build)
	}{
		{
			name: "a wrong pull credential",
			access: registry.Access{
				Push: registry.Credential{Username: "worker", Password: secret.String("push-" + t.Name())},
				Pull: registry.Credential{Username: "hosts", Password: secret.String("pull-" + t.Name())},
			},
			cause: "the registry asks for credentials this host did not give or got wrong",
			breakPull: func(t *testing.T, s *stack, _ mesh.Build) {
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
			},
		},
		{
			name:   "the image not in the registry",
			access: registry.Access{Deletes: true},
			cause:  "the image is not in the registry",
			breakPull: func(t *testing.T, s *stack, next mesh.Build) {
				repo := strings.TrimPrefix(next.Image, s.regAddr+"/")
				req, err := http.NewRequest(http.MethodDelete, "http://"+s.regAddr+"/v2/"+repo+"/manifests/"+next.Digest, nil)
				require.NoError(t, err)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				_ = resp.Body.Close()
				require.Equal(t, http.StatusAccepted, resp.StatusCode, "the registry deletes the manifest")
			},
		},
		{
			// Retried (the reason says when next) until the push's
			// running timeout, since a registry may be down a moment.
			name:      "the registry down",
			cause:     "the registry did not answer",
			retried:   true,
			breakPull: func(_ *testing.T, s *stack, _ mesh.Build) { s.stopRegistry() },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := dockerMesh()
			o.modules, o.controlPlane, o.machines = []string{"host"}, nil, hostFleet(2)
			o.tiers = "{1: {max_parallel: 1}}"
			o.registryAccess = tc.access
			if tc.retried {
				o.push = "{running_timeout: 20s}"
			}
			s := newStack(t, o)
			first := *s.converge("host", s.commit("host")).Build
			before := map[string]engineInspect{}
			applied := map[string]int{}
			for m, h := range s.hosts {
				before[m] = s.dockerRuns(m, first)
				applied[m] = len(h.Applied())
			}

			commit := s.commit("host")
			id := s.startGated("host", commit, 1)
			next := s.build("host", commit)
			tc.breakPull(t, s, next)
			_, err := controlPlan(s, id, meshapi.UpdateApprove, meshapi.ApproveInput{By: "pull failure test"})
			require.NoError(t, err)
			st := s.wait(id)
			t.Logf("the plan's words: %s: %s", st.State, st.Reason)
			require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
			e1, _ := st.Machine("edge-1")
			require.Equal(t, meshapi.MachineFailed, e1.State)
			require.Contains(t, e1.Reason, "pull "+next.Image+"@"+next.Digest+": ", "the failure names the image")
			require.Contains(t, e1.Reason, tc.cause, "and the cause")
			if tc.retried {
				require.Contains(t, e1.Reason, "; retrying in ", "a pull the registry may yet answer is tried again")
			} else {
				require.NotContains(t, e1.Reason, "retrying", "a pull the registry turned away is not")
			}
			require.NotContains(t, e1.Reason, "\n", "in one line")
			require.Contains(t, st.Reason, tc.cause, "the plan's words carry the cause")

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
		})
	}
}
