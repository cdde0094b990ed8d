package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent/dockertest"
	"github.com/meshroll/meshroll/internal/agent/execrt/execrttest"
	"github.com/meshroll/meshroll/internal/mesh"
)

// engineWait bounds what a test waits for from the real engine, which
// pulls and starts containers in seconds on a loaded machine.
const engineWait = time.Minute

// testEngineSocket is the test engine's socket (dockertest.Socket).
func testEngineSocket(t *testing.T) string {
	t.Helper()
	return dockertest.Socket(t, dockertest.EnvSocket, "scripts/docker-test.sh")
}

// engineClient calls the test engine behind the runtime's back, as a
// person with the docker CLI would.
type engineClient struct{ hc *http.Client }

func newEngineClient(socket string) engineClient {
	return engineClient{hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}}
}

func (e engineClient) do(t *testing.T, method, path string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://docker"+path, nil)
	require.NoError(t, err)
	resp, err := e.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "%s %s", method, path)
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
}

// engineRun is a runtime of a machine of its own on an engine (through
// socket), running c, module web, as the test program with args (serve v1
// on the host network when c is zero), and waiting for it to run: the
// runtime is closed and the machine's containers removed from the engine
// when the test ends.
func engineRun(t *testing.T, socket, engine string, poll time.Duration, c mesh.Container, args ...string) (*DockerRuntime, *states) {
	t.Helper()
	if len(args) == 0 {
		c.Network, args = mesh.NetworkHost, []string{"serve", "v1"}
	}
	reg := execrttest.NewRegistry(t)
	img := reg.Push(t, "meshroll/events", execrttest.AppImage(t, nil, args...))
	machine := fmt.Sprintf("%s-%d", strings.ToLower(t.Name()), os.Getpid())
	r := NewDockerRuntime(machine, socket)
	r.poll = poll
	t.Cleanup(func() {
		ctx := context.Background()
		require.NoError(t, r.Close(ctx))
		require.NoError(t, NewDockerRuntime(machine, engine).Purge(ctx))
	})
	s := newStates()
	c.Module, c.Image, c.Digest, c.Generation = "web", img.Image, img.Digest, 1
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{c}, s.update))
	s.waitMatchWithin(t, engineWait, "web running", func(last map[string]Update) bool { return last["web"].State == mesh.StateRunning })
	return r, s
}

// A container killed outside meshroll is seen exited through the engine's
// die event, and started again when the reviver's wait ends: with the
// safety poll an hour long, nothing else could end either wait.
func TestDockerEngineEventEndsTheWait(t *testing.T) {
	socket := testEngineSocket(t)
	r, s := engineRun(t, socket, socket, time.Hour, mesh.Container{})
	newEngineClient(socket).do(t, http.MethodPost, "/containers/"+r.idOf("web")+"/kill", nil)
	s.waitMatchWithin(t, engineWait, "web seen killed", func(last map[string]Update) bool {
		return last["web"].State == mesh.StateExited && strings.Contains(last["web"].Reason, "exit code 137")
	})
	s.waitMatchWithin(t, engineWait, "web started again", func(last map[string]Update) bool {
		return last["web"].State == mesh.StateRunning && last["web"].Restarts == 1
	})
}

// A container that dies while the event stream is down is seen when the
// stream is back: nothing is lost with the events the engine sent nobody.
func TestDockerEngineEventStreamCutLosesNothing(t *testing.T) {
	socket := testEngineSocket(t)
	p := newCuttableSocket(t, socket)
	r, s := engineRun(t, p.path, socket, time.Hour, mesh.Container{})
	id := r.idOf("web")
	p.cut()
	e := newEngineClient(socket)
	e.do(t, http.MethodPost, "/containers/"+id+"/kill", nil)
	execrttest.Eventually(t, engineWait, "the engine has web exited", func() bool {
		var st struct{ State struct{ Running bool } }
		e.do(t, http.MethodGet, "/containers/"+id+"/json", &st)
		return !st.State.Running
	})
	p.restore()
	s.waitMatchWithin(t, engineWait, "web seen killed", func(last map[string]Update) bool {
		return last["web"].State == mesh.StateExited && strings.Contains(last["web"].Reason, "exit code 137")
	})
}

// On an engine with a bridge (scripts/docker-test.sh --bridge), a
// container declared on the bridge has an address of its own, and the
// agent's http probe reaches it from the machine through the port the
// runtime publishes on 127.0.0.1.
func TestDockerRuntimeBridgePublishesTheProbePort(t *testing.T) {
	socket := dockertest.Socket(t, dockertest.EnvBridgeSocket, "scripts/docker-test.sh --bridge")
	port, err := DefaultPorts.pick(nil)
	require.NoError(t, err)
	// On the bridge the process listens on its container's address, which
	// the published port reaches, not on its loopback.
	c := mesh.Container{Network: mesh.NetworkBridge, Env: map[string]string{"TESTAPP_HOST": "0.0.0.0"}}
	c = resolved(checked(c, mesh.Health{HTTP: &mesh.HTTPProbe{Port: mesh.PortAuto, Path: "/healthz"}}), port)
	r, _ := engineRun(t, socket, socket, dockerSafetyPoll, c, "http", "v1")
	execrttest.Eventually(t, engineWait, "the probe answers through the published port", func() bool {
		var out strings.Builder
		code, err := probeHTTP(context.Background(), port, "/healthz", &out)
		return err == nil && code == http.StatusOK && out.String() == "testapp v1 status 200\n"
	})
	var in struct {
		HostConfig      struct{ NetworkMode string }
		NetworkSettings struct{ IPAddress string }
	}
	newEngineClient(socket).do(t, http.MethodGet, "/containers/"+r.idOf("web")+"/json", &in)
	require.NotEqual(t, "host", in.HostConfig.NetworkMode)
	require.NotEmpty(t, in.NetworkSettings.IPAddress, "an address of its own on the bridge")
}

// cuttableSocket is a unix socket passing connections on to the engine's,
// which the test can cut (every connection closed, new ones refused) and
// restore: an engine restart, or a connection lost, as the runtime sees it.
type cuttableSocket struct {
	path, target string
	ln           net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newCuttableSocket(t *testing.T, target string) *cuttableSocket {
	t.Helper()
	// Unix socket paths are short; t.TempDir's may not be.
	dir, err := os.MkdirTemp("", "engine")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &cuttableSocket{path: filepath.Join(dir, "docker.sock"), target: target, conns: map[net.Conn]struct{}{}}
	p.ln, err = net.Listen("unix", p.path)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.ln.Close()
		p.cut()
	})
	go p.serve()
	return p
}

func (p *cuttableSocket) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("unix", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track notes a connection's two ends, unless the socket was cut since
// it was accepted (then both are closed).
func (p *cuttableSocket) track(ends ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range ends {
		if p.down {
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
	}
	return !p.down
}

func (p *cuttableSocket) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// cut closes every connection and refuses new ones until restore.
func (p *cuttableSocket) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore passes connections on again.
func (p *cuttableSocket) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
