package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

// fakeEngine is a Docker Engine API stand-in for the calls DockerRuntime
// makes, keeping containers in memory: enough to test the runtime's
// choreography (pull by digest, create with labels, start, replace, remove,
// adopt by name) in one piece. The testsuite's docker tests run the runtime
// against a real engine.
type fakeEngine struct {
	mu         sync.Mutex
	pulled     []string
	containers map[string]*fakeContainer
	n          int
	pullFail   string
	// execs are the exec instances made, by ID: the command's argv. Its
	// last argument is its exit code; it prints its argv to stdout and
	// "to stderr" to stderr.
	execs map[string][]string
}

type fakeContainer struct {
	ID           string
	Name         string
	Image        string
	Labels       map[string]string
	Env          []string
	Cmd          []string
	ExposedPorts map[string]struct{}
	HostConfig   struct {
		PortBindings map[string][]map[string]string
		NetworkMode  string
	}
	Status       string
	RestartCount int
	Removed      bool
}

func newFakeEngine(t *testing.T) (*fakeEngine, string) {
	e := &fakeEngine{containers: map[string]*fakeContainer{}, execs: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(srv.Close)
	return e, srv.URL
}

func (e *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	path := r.URL.Path
	switch {
	case path == "/_ping":
		_, _ = w.Write([]byte("OK"))
	case r.Method == http.MethodPost && path == "/images/create":
		ref := r.URL.Query().Get("fromImage")
		if e.pullFail != "" && strings.Contains(ref, e.pullFail) {
			_, _ = w.Write([]byte(`{"status":"Pulling"}` + "\n" + `{"error":"manifest unknown"}` + "\n"))
			return
		}
		e.pulled = append(e.pulled, ref)
		_, _ = w.Write([]byte(`{"status":"Downloaded"}` + "\n"))
	case r.Method == http.MethodPost && path == "/containers/create":
		var c fakeContainer
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, `{"message":"bad body"}`, http.StatusBadRequest)
			return
		}
		c.Name = r.URL.Query().Get("name")
		if e.byName(c.Name) != nil {
			w.WriteHeader(http.StatusConflict)
			_, _ = fmt.Fprintf(w, `{"message":"the container name %q is already in use"}`, c.Name)
			return
		}
		e.n++
		c.ID = fmt.Sprintf("c%d", e.n)
		c.Status = "created"
		e.containers[c.ID] = &c
		_ = json.NewEncoder(w).Encode(map[string]string{"Id": c.ID})
	case r.Method == http.MethodGet && path == "/containers/json":
		var f map[string][]string
		_ = json.Unmarshal([]byte(r.URL.Query().Get("filters")), &f)
		var out []map[string]any
		for _, c := range e.containers {
			if c.Removed || len(f["label"]) != 1 || "io.meshroll.machine="+c.Labels[labelMachine] != f["label"][0] {
				continue
			}
			out = append(out, map[string]any{"Id": c.ID, "Labels": c.Labels})
		}
		_ = json.NewEncoder(w).Encode(out)
	case strings.HasPrefix(path, "/containers/"):
		parts := strings.Split(strings.TrimPrefix(path, "/containers/"), "/")
		c, ok := e.containers[parts[0]]
		if !ok {
			c = e.byName(parts[0])
			ok = c != nil
		}
		if !ok || c.Removed {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"no such container"}`))
			return
		}
		switch {
		case r.Method == http.MethodDelete:
			c.Removed = true
			w.WriteHeader(http.StatusNoContent)
		case len(parts) == 2 && parts[1] == "start":
			c.Status = "running"
			w.WriteHeader(http.StatusNoContent)
		case len(parts) == 2 && parts[1] == "stop":
			c.Status = "exited"
			w.WriteHeader(http.StatusNoContent)
		case len(parts) == 2 && parts[1] == "json":
			_ = json.NewEncoder(w).Encode(map[string]any{
				"Id": c.ID, "Config": map[string]any{"Labels": c.Labels},
				"State": map[string]any{"Status": c.Status, "Running": c.Status == "running"}, "RestartCount": c.RestartCount,
			})
		case len(parts) == 2 && parts[1] == "exec":
			var x struct{ Cmd []string }
			if err := json.NewDecoder(r.Body).Decode(&x); err != nil {
				http.Error(w, `{"message":"bad body"}`, http.StatusBadRequest)
				return
			}
			e.n++
			id := fmt.Sprintf("x%d", e.n)
			e.execs[id] = x.Cmd
			_ = json.NewEncoder(w).Encode(map[string]string{"Id": id})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	case strings.HasPrefix(path, "/exec/"):
		parts := strings.Split(strings.TrimPrefix(path, "/exec/"), "/")
		argv, ok := e.execs[parts[0]]
		if !ok || len(parts) != 2 {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		switch parts[1] {
		case "start":
			w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
			frame := func(stream byte, s string) {
				hdr := []byte{stream, 0, 0, 0, 0, 0, 0, 0}
				binary.BigEndian.PutUint32(hdr[4:], uint32(len(s)))
				_, _ = w.Write(append(hdr, s...))
			}
			frame(1, strings.Join(argv, " ")+"\n")
			frame(2, "to stderr\n")
		case "json":
			code, _ := strconv.Atoi(argv[len(argv)-1])
			_ = json.NewEncoder(w).Encode(map[string]any{"Running": false, "ExitCode": code})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// byName is the live container named name, or nil.
func (e *fakeEngine) byName(name string) *fakeContainer {
	for _, c := range e.containers {
		if !c.Removed && c.Name == name {
			return c
		}
	}
	return nil
}

// live returns the live containers by module.
func (e *fakeEngine) live() map[string]*fakeContainer {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]*fakeContainer{}
	for _, c := range e.containers {
		if !c.Removed {
			out[c.Labels[labelModule]] = c
		}
	}
	return out
}

// states collects the runtime's updates.
type states struct {
	mu   sync.Mutex
	last map[string]Update
	ch   chan struct{}
}

func newStates() *states { return &states{last: map[string]Update{}, ch: make(chan struct{}, 100)} }

func (s *states) update(u Update) {
	s.mu.Lock()
	s.last[u.Module] = u
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// waitFor blocks until every module listed is in state.
func (s *states) waitFor(t *testing.T, state string, modules ...string) {
	t.Helper()
	s.waitMatch(t, fmt.Sprintf("modules %v reaching %s", modules, state), func(last map[string]Update) bool {
		for _, m := range modules {
			if last[m].State != state {
				return false
			}
		}
		return true
	})
}

// waitMatch blocks until ok accepts the last updates, by module.
func (s *states) waitMatch(t *testing.T, what string, ok func(map[string]Update) bool) {
	t.Helper()
	s.waitMatchWithin(t, waitLimit, what, ok)
}

// waitMatchWithin is waitMatch failing after limit.
func (s *states) waitMatchWithin(t *testing.T, limit time.Duration, what string, ok func(map[string]Update) bool) {
	t.Helper()
	deadline := time.After(limit)
	for {
		s.mu.Lock()
		done := ok(s.last)
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-s.ch:
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("never: %s: %+v", what, s.last)
		}
	}
}

func dockerCtr(module string, gen int64) mesh.Container {
	c := ctr(module, gen)
	c.Image = "registry.test/meshroll/" + module
	c.Env = map[string]string{"GEN": fmt.Sprint(gen)}
	return c
}

func TestDockerRuntimeChoreography(t *testing.T) {
	e, url := newFakeEngine(t)
	r := NewDockerRuntime("edge-1", url)
	r.poll = 5 * time.Millisecond
	ctx := context.Background()
	require.NoError(t, r.Ping(ctx))
	s := newStates()

	web1, api1 := dockerCtr("web", 1), dockerCtr("api", 1)
	require.NoError(t, r.Apply(ctx, []mesh.Container{web1, api1}, s.update))
	s.waitFor(t, mesh.StateRunning, "web", "api")
	live := e.live()
	require.Len(t, live, 2)
	require.Equal(t, web1.Image+"@"+web1.Digest, live["web"].Image, "the image is pulled and run by digest")
	require.Equal(t, "edge-1", live["web"].Labels[labelMachine])
	require.Equal(t, []string{"GEN=1", "MESHROLL_DIGEST=" + web1.Digest, "MESHROLL_MACHINE=edge-1", "MESHROLL_MODULE=web"}, live["web"].Env,
		"the declared environment and the runtime's variables over it")
	apiBefore := live["api"]

	// Replace web, keep api untouched.
	web2 := dockerCtr("web", 2)
	require.NoError(t, r.Apply(ctx, []mesh.Container{web2, api1}, s.update))
	s.waitFor(t, mesh.StateRunning, "web", "api")
	live = e.live()
	require.Len(t, live, 2, "the old web container is removed")
	require.Equal(t, web2.Image+"@"+web2.Digest, live["web"].Image)
	require.Same(t, apiBefore, live["api"], "an unchanged container is kept, not recreated")

	// Drop api.
	require.NoError(t, r.Apply(ctx, []mesh.Container{web2}, s.update))
	s.waitFor(t, mesh.StateRunning, "web")
	require.Eventually(t, func() bool { return len(e.live()) == 1 }, waitLimit, 5*time.Millisecond)

	require.NoError(t, r.Close(ctx))
	live = e.live()
	require.Len(t, live, 1, "close leaves the containers running")
	webID := live["web"].ID

	// An agent started again adopts what runs (same container, not
	// recreated, nothing pulled), and its first declaration's sweep removes
	// a container of this machine it no longer names; a container of
	// another machine, or none, is not touched.
	e.mu.Lock()
	e.pulled = nil
	e.containers["stray"] = &fakeContainer{ID: "stray", Name: "meshroll-edge-1-old", Labels: map[string]string{labelMachine: "edge-1", labelModule: "old", labelSpec: "x"}, Status: "running"}
	e.containers["other"] = &fakeContainer{ID: "other", Name: "meshroll-edge-2-web", Labels: map[string]string{labelMachine: "edge-2", labelModule: "web"}, Status: "running"}
	e.containers["foreign"] = &fakeContainer{ID: "foreign", Name: "postgres", Status: "running"}
	e.mu.Unlock()
	r2 := NewDockerRuntime("edge-1", url)
	r2.poll = 5 * time.Millisecond
	s2 := newStates()
	require.NoError(t, r2.Apply(ctx, []mesh.Container{web2}, s2.update))
	s2.waitFor(t, mesh.StateRunning, "web")
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.containers["stray"].Removed
	}, waitLimit, 5*time.Millisecond, "the sweep removes this machine's container no declaration names")
	e.mu.Lock()
	require.Equal(t, webID, e.byName(containerName("edge-1", "web", web2.SpecHash())).ID, "adopted, not recreated")
	require.Empty(t, e.pulled, "nothing pulled for a container adopted")
	require.False(t, e.containers["other"].Removed, "another machine's container is left alone")
	require.False(t, e.containers["foreign"].Removed, "a container meshroll did not create is left alone")
	e.mu.Unlock()
	require.NoError(t, r2.Close(ctx))
}

// A container of the name meshroll would give a spec, but not created by
// meshroll for it, is never taken over or replaced: the container fails
// to start, saying so.
func TestDockerRuntimeLeavesANameItDidNotCreate(t *testing.T) {
	e, url := newFakeEngine(t)
	web := dockerCtr("web", 1)
	name := containerName("edge-1", "web", web.SpecHash())
	e.containers["squatter"] = &fakeContainer{ID: "squatter", Name: name, Status: "running"}
	r := NewDockerRuntime("edge-1", url)
	r.poll = 5 * time.Millisecond
	s := newStates()
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{web}, s.update))
	s.waitFor(t, mesh.StateExited, "web")
	require.Contains(t, s.last["web"].Reason, "that meshroll did not create for this declaration is on the engine; remove or rename it")
	require.False(t, e.containers["squatter"].Removed)
	require.NoError(t, r.Close(context.Background()))
}

// TestDockerRuntimeHealth: a probe's port is published on loopback under
// its own number, with the picked port in the environment; an exec probe
// runs through the engine's exec API, its streams and exit code read back;
// the engine's restarts are reported.
func TestDockerRuntimeHealth(t *testing.T) {
	e, url := newFakeEngine(t)
	r := NewDockerRuntime("edge-1", url)
	r.poll = 5 * time.Millisecond
	ctx := context.Background()
	s := newStates()
	web := resolved(checked(dockerCtr("web", 1), mesh.Health{HTTP: &mesh.HTTPProbe{Path: "/healthz"}}), 41234)
	require.NoError(t, r.Apply(ctx, []mesh.Container{web}, s.update))
	s.waitFor(t, mesh.StateRunning, "web")
	c := e.live()["web"]
	assert.Contains(t, c.Env, mesh.EnvPort+"=41234")
	assert.Equal(t, map[string]struct{}{"41234/tcp": {}}, c.ExposedPorts)
	assert.Equal(t, map[string][]map[string]string{"41234/tcp": {{"HostIp": "127.0.0.1", "HostPort": "41234"}}}, c.HostConfig.PortBindings)

	var out strings.Builder
	code, err := r.Exec(ctx, "web", []string{"check", "--deep", "3"}, &out)
	require.NoError(t, err)
	assert.Equal(t, 3, code)
	assert.Equal(t, "check --deep 3\nto stderr\n", out.String())
	_, err = r.Exec(ctx, "api", []string{"check"}, &out)
	assert.ErrorContains(t, err, "container api has not started")

	e.mu.Lock()
	c.RestartCount = 2
	e.mu.Unlock()
	s.waitMatch(t, "the engine's restarts reported", func(last map[string]Update) bool { return last["web"].Restarts == 2 })
	require.NoError(t, r.Close(ctx))
}

// TestDockerRuntimeHostNetwork: a container declared on the host network
// joins it and publishes nothing, its probe reaching it on the machine's
// own port.
func TestDockerRuntimeHostNetwork(t *testing.T) {
	e, url := newFakeEngine(t)
	r := NewDockerRuntime("edge-1", url)
	r.poll = 5 * time.Millisecond
	s := newStates()
	web := resolved(checked(dockerCtr("web", 1), mesh.Health{HTTP: &mesh.HTTPProbe{Path: "/healthz"}}), 41234)
	web.Network = mesh.NetworkHost
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{web}, s.update))
	s.waitFor(t, mesh.StateRunning, "web")
	c := e.live()["web"]
	assert.Equal(t, "host", c.HostConfig.NetworkMode)
	assert.Empty(t, c.HostConfig.PortBindings, "nothing published on the host network")
	assert.Empty(t, c.ExposedPorts)
	assert.Contains(t, c.Env, mesh.EnvPort+"=41234")
	require.NoError(t, r.Close(context.Background()))
}

func TestDockerRuntimePullFailureExits(t *testing.T) {
	e, url := newFakeEngine(t)
	e.pullFail = "broken"
	r := NewDockerRuntime("edge-1", url)
	r.poll = 5 * time.Millisecond
	s := newStates()
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{dockerCtr("broken", 1)}, s.update))
	s.waitFor(t, mesh.StateExited, "broken")
	require.Contains(t, s.last["broken"].Reason, "manifest unknown")
	require.NoError(t, r.Close(context.Background()))
}

func TestDockerRuntimeNoEngine(t *testing.T) {
	_, err := NewRuntime(RuntimeDocker, RuntimeOptions{Machine: "edge-1", DockerSocket: t.TempDir() + "/none.sock"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "no engine answers")
}

// Purge removes every container of its machine, running or not, and
// nothing else.
func TestDockerRuntimePurgeRemovesOnlyItsMachines(t *testing.T) {
	e, url := newFakeEngine(t)
	e.mu.Lock()
	e.containers["web"] = &fakeContainer{ID: "web", Name: "meshroll-edge-1-web", Labels: map[string]string{labelMachine: "edge-1", labelModule: "web", labelSpec: "x"}, Status: "running"}
	e.containers["old"] = &fakeContainer{ID: "old", Name: "meshroll-edge-1-old", Labels: map[string]string{labelMachine: "edge-1", labelModule: "old", labelSpec: "y"}, Status: "exited"}
	e.containers["other"] = &fakeContainer{ID: "other", Name: "meshroll-edge-2-web", Labels: map[string]string{labelMachine: "edge-2", labelModule: "web"}, Status: "running"}
	e.containers["foreign"] = &fakeContainer{ID: "foreign", Name: "postgres", Status: "running"}
	e.mu.Unlock()
	require.NoError(t, NewDockerRuntime("edge-1", url).Purge(context.Background()))
	e.mu.Lock()
	defer e.mu.Unlock()
	require.True(t, e.containers["web"].Removed, "a running container of the machine")
	require.True(t, e.containers["old"].Removed, "an exited one")
	require.False(t, e.containers["other"].Removed, "another machine's is left")
	require.False(t, e.containers["foreign"].Removed, "one meshroll did not create is left")
}
