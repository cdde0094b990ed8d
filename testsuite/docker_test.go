package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/agent/dockertest"
	"github.com/meshroll/meshroll/internal/mesh"
)

// envDockerSocket names the test engine's socket (dockertest.EnvSocket).
const envDockerSocket = dockertest.EnvSocket

// dockerEngine is the test engine's socket for machine's docker runtime
// (the bridge engine's with bridge): the test skips without one (fails on
// CI, which must run it), and when it ends every container the machine's
// runtime left on the engine is removed, whatever the runtime did.
func (s *stack) dockerEngine(machine string, bridge bool) string {
	t := s.t
	t.Helper()
	socket := dockerSocket(t)
	if bridge {
		socket = dockerBridgeSocket(t)
	}
	e := engine{socket: socket}
	t.Cleanup(func() { e.removeAll(t, s.engineName(machine)) })
	return socket
}

// dockerSocket is the test engine's socket: the test skips without one
// (fails on CI, which must run it).
func dockerSocket(t *testing.T) string {
	t.Helper()
	return dockertest.Socket(t, envDockerSocket, "scripts/docker-test.sh")
}

// dockerBridgeSocket is the bridge engine's socket, as dockerSocket is the
// test engine's.
func dockerBridgeSocket(t *testing.T) string {
	t.Helper()
	return dockertest.Socket(t, dockertest.EnvBridgeSocket, "scripts/docker-test.sh --bridge")
}

// removeAll removes every container (running or not) labelled for
// machine, whatever the runtime did.
func (e engine) removeAll(t *testing.T, machine string) {
	for _, c := range e.containers(t, machine) {
		_ = e.do(http.MethodDelete, "/containers/"+c.ID+"?force=1", nil)
	}
}

// engineName is the name a docker runtime knows machine by on the shared
// test engine: the stack's namespace and the machine's name, so that two
// tests' control-node never share container names or labels. (One engine
// serves one machine in a fleet; here it serves every test's.)
func (s *stack) engineName(machine string) string { return s.namespace + "." + machine }

// engine is a client of the test engine's API, for what a test checks
// behind the runtime's back.
type engine struct{ socket string }

// engineContainer is what the engine lists and inspects of a container.
type engineContainer struct {
	ID     string            `json:"Id"`
	Image  string            `json:"Image"`
	Labels map[string]string `json:"Labels"`
	State  string            `json:"State"`
}

// engineInspect is what the engine says of one container's settings.
type engineInspect struct {
	ID     string `json:"Id"`
	Config struct {
		Image string `json:"Image"`
	} `json:"Config"`
	HostConfig struct {
		NetworkMode string `json:"NetworkMode"`
	} `json:"HostConfig"`
	State struct {
		Running   bool   `json:"Running"`
		StartedAt string `json:"StartedAt"`
	} `json:"State"`
	RestartCount int `json:"RestartCount"`
}

func (e engine) client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.socket)
		},
	}}
}

func (e engine) do(method, path string, out any) error { return e.send(method, path, nil, out) }

// send does one request with body (JSON, when not nil) and decodes the
// answer into out, when not nil.
func (e engine) send(method, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, "http://docker"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("engine %s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (e engine) get(path string, out any) error { return e.do(http.MethodGet, path, out) }

// containers lists every container (running or not) a runtime labelled
// with machine.
func (e engine) containers(t *testing.T, machine string) []engineContainer {
	t.Helper()
	f, err := json.Marshal(map[string][]string{"label": {"io.meshroll.machine=" + machine}})
	require.NoError(t, err)
	var cs []engineContainer
	require.NoError(t, e.get("/containers/json?all=1&filters="+url.QueryEscape(string(f)), &cs))
	return cs
}

// dockerRuns asserts, from the engine itself, that machine runs exactly
// one container of b's module, of b's image by digest, on the host
// network, and returns what the engine says of it.
func (s *stack) dockerRuns(machine string, b mesh.Build) engineInspect {
	s.t.Helper()
	e := engine{socket: os.Getenv(envDockerSocket)}
	var found []engineContainer
	for _, c := range e.containers(s.t, s.engineName(machine)) {
		if c.Labels["io.meshroll.module"] == b.Module {
			found = append(found, c)
		}
	}
	require.Len(s.t, found, 1, "%s: one %s container on the engine", machine, b.Module)
	var in engineInspect
	require.NoError(s.t, e.get("/containers/"+found[0].ID+"/json", &in))
	require.Equal(s.t, b.Image+"@"+b.Digest, in.Config.Image, "%s's %s container runs the build by digest", machine, b.Module)
	require.True(s.t, in.State.Running, "%s's %s container runs", machine, b.Module)
	require.Equal(s.t, "host", in.HostConfig.NetworkMode, "%s's %s container is on the host network", machine, b.Module)
	in.ID = found[0].ID
	return in
}

// dockerMesh is exampleMesh built into real images and run by the docker
// runtime on the test engine.
func dockerMesh() stackOptions {
	o := imageMesh()
	o.docker = true
	return o
}

// The 2026-10-02 incident on a real Docker Engine: the host plan composed
// while controller k1 ran, held at its gate while k2 rolled out, sends k2
// when it goes on, and the engine runs k2 on the control node, on the host
// network, pulled by digest from the embedded registry.
func TestDockerStaleControllerPlanIsRebasedNotDowngraded(t *testing.T) {
	t.Parallel()
	s := staleControllerRebased(t, dockerMesh())
	cfg := s.cfg
	for _, m := range cfg.MachineNames() {
		for _, mod := range cfg.Machines[m].Modules {
			rep := s.hosts[m].Report()
			r, ok := rep.Running(mod)
			require.True(t, ok, "%s reports %s", m, mod)
			s.dockerRuns(m, mesh.Build{Module: mod, Digest: r.Digest, Image: r.Image})
		}
	}
}

// An agent stopped cleanly, as a service manager stops it for an upgrade,
// and started again on its state leaves the machine's services running:
// on the real engine, every container keeps its ID and start time (not
// recreated, not restarted), the agent reports them running, and the next
// merge rolls on as usual.
func TestDockerAgentRestartedKeepsItsContainers(t *testing.T) {
	t.Parallel()
	s := newStack(t, dockerMesh())
	h, k := s.converge("host", s.commit("host")), s.converge("mesh-controller", s.commit("mesh-controller"))
	builds := map[string]mesh.Build{"host": *h.Build, "mesh-controller": *k.Build}
	running := func() map[string]engineInspect {
		out := map[string]engineInspect{}
		for _, m := range s.cfg.MachineNames() {
			for _, mod := range s.cfg.Machines[m].Modules {
				out[m+"/"+mod] = s.dockerRuns(m, builds[mod])
			}
		}
		return out
	}
	before := running()

	for _, m := range s.cfg.MachineNames() {
		s.hosts[m].restart()
	}
	for _, m := range s.cfg.MachineNames() {
		eventually(t, time.Minute, m+" reports its containers running again", func() bool {
			rep := s.hosts[m].Report()
			for _, r := range rep.Containers {
				if r.State != mesh.StateRunning {
					return false
				}
			}
			return len(rep.Containers) == len(s.cfg.Machines[m].Modules)
		})
	}
	after := running()
	for key, b := range before {
		a := after[key]
		require.Equal(t, b.ID, a.ID, "%s: the same container after the agent's restart", key)
		require.Equal(t, b.State.StartedAt, a.State.StartedAt, "%s: not restarted", key)
		require.Equal(t, b.RestartCount, a.RestartCount, "%s: not restarted", key)
	}

	h2 := s.converge("host", s.commit("host"))
	s.runs("control-node", *h2.Build, builds["mesh-controller"])
	s.dockerRuns("control-node", *h2.Build)
	for _, m := range s.cfg.MachineNames() {
		s.checkJournal(m)
	}
}

// Containers meshroll did not create are never touched: a container of the
// same image with no labels, and one labelled for a machine of another
// mesh, run on (same container, never restarted) through a hundred pushes
// to ten machines sharing the engine, and every agent's restart (whose
// first declaration sweeps away its own machine's stray containers), while
// a stray of this machine's own goes.
func TestDockerLeavesForeignContainersAlone(t *testing.T) {
	t.Parallel()
	o := dockerMesh()
	o.modules, o.controlPlane, o.machines = []string{"host"}, nil, hostFleet(9)
	s := newStack(t, o)
	first := s.converge("host", s.commit("host"))
	e := engine{socket: os.Getenv(envDockerSocket)}
	ref := first.Build.Image + "@" + first.Build.Digest
	run := func(name string, labels map[string]string) string {
		id := e.create(t, name, ref, labels)
		t.Cleanup(func() { _ = e.do(http.MethodDelete, "/containers/"+id+"?force=1", nil) })
		return id
	}
	foreign := run(s.namespace+"-foreign", nil)
	otherMesh := run(s.namespace+"-other-mesh", map[string]string{
		"io.meshroll.machine": s.namespace + ".elsewhere", "io.meshroll.module": "host", "io.meshroll.spec": "0"})
	stray := run(s.namespace+"-stray", map[string]string{
		"io.meshroll.machine": s.engineName("edge-1"), "io.meshroll.module": "gone", "io.meshroll.spec": "0"})

	started := map[string]string{}
	for _, id := range []string{foreign, otherMesh} {
		var in engineInspect
		require.NoError(t, e.get("/containers/"+id+"/json", &in))
		started[id] = in.State.StartedAt
	}

	// pushes is how many declarations the engine's machines applied.
	pushes := func() int {
		n := 0
		for _, h := range s.hosts {
			n += len(h.Applied())
		}
		return n
	}
	for pushes() < 100 {
		s.converge("host", s.commit("host"))
	}
	for _, m := range s.cfg.MachineNames() {
		s.hosts[m].restart()
	}
	last := s.converge("host", s.commit("host"))
	t.Logf("%d pushes to %d machines on the engine", pushes(), len(s.hosts))
	for _, m := range s.cfg.MachineNames() {
		s.dockerRuns(m, *last.Build)
		s.checkJournal(m)
	}
	for _, id := range []string{foreign, otherMesh} {
		var in engineInspect
		require.NoError(t, e.get("/containers/"+id+"/json", &in), "container %s is still there", id)
		require.True(t, in.State.Running, "container %s still runs", id)
		require.Equal(t, started[id], in.State.StartedAt, "container %s was never restarted", id)
		require.Zero(t, in.RestartCount)
	}
	eventually(t, time.Minute, "edge-1's stray container removed", func() bool {
		return e.get("/containers/"+stray+"/json", nil) != nil
	})
}

// create creates and starts a container of image ref named name with
// labels, on the host network running the image's entrypoint, and returns
// its ID.
func (e engine) create(t *testing.T, name, ref string, labels map[string]string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"Image": ref, "Labels": labels, "HostConfig": map[string]any{"NetworkMode": "host"}})
	require.NoError(t, err)
	var created struct {
		ID string `json:"Id"`
	}
	require.NoError(t, e.send(http.MethodPost, "/containers/create?name="+url.QueryEscape(name), body, &created))
	require.NoError(t, e.send(http.MethodPost, "/containers/"+created.ID+"/start", nil, nil))
	return created.ID
}

// What is declared is what runs (docs/host-api.md, Drift): a meshroll
// container removed behind the agent's back (docker rm -f) is created again
// from the declaration, and one stopped (docker stop), which the engine
// does not start again, is started again; each is journalled as an exit
// saying what happened, and the next merge rolls on as usual.
func TestDockerPutsBackAContainerChangedOutsideMeshroll(t *testing.T) {
	t.Parallel()
	s := newStack(t, dockerMesh())
	first := s.converge("host", s.commit("host"))
	b := *first.Build
	e := engine{socket: os.Getenv(envDockerSocket)}
	edge := s.hosts["edge-1"]
	exits := func(words string) int {
		n := 0
		for _, en := range edge.journal() {
			if en.Outcome == agent.OutcomeExited && strings.Contains(en.Message, words) {
				n++
			}
		}
		return n
	}
	runsAgain := func(what string, ok func(engineInspect) bool) engineInspect {
		var in engineInspect
		eventually(t, time.Minute, what, func() bool {
			r, running := edge.Report().Running("host")
			if !running || r.State != mesh.StateRunning || r.Digest != b.Digest {
				return false
			}
			for _, c := range e.containers(t, s.engineName("edge-1")) {
				if c.Labels["io.meshroll.module"] == "host" && e.get("/containers/"+c.ID+"/json", &in) == nil && in.State.Running {
					in.ID = c.ID
					return ok(in)
				}
			}
			return false
		})
		return in
	}

	removed := s.dockerRuns("edge-1", b)
	require.NoError(t, e.do(http.MethodDelete, "/containers/"+removed.ID+"?force=1", nil))
	back := runsAgain("edge-1's host container created again", func(in engineInspect) bool { return in.ID != removed.ID })
	require.Equal(t, 1, exits("was removed outside meshroll"), "the journal says the container was removed, once")
	s.dockerRuns("edge-1", b)

	require.NoError(t, e.do(http.MethodPost, "/containers/"+back.ID+"/stop?t=1", nil))
	again := runsAgain("edge-1's host container started again", func(in engineInspect) bool {
		return in.ID == back.ID && in.State.StartedAt != back.State.StartedAt
	})
	require.Equal(t, back.ID, again.ID, "the stopped container is started again, not replaced")
	require.Equal(t, 1, exits("the engine will not start it again"), "the journal says it stopped and is started again, once")

	next := s.converge("host", s.commit("host"))
	for _, m := range s.cfg.MachineNames() {
		s.dockerRuns(m, *next.Build)
		s.checkJournal(m)
	}
}
