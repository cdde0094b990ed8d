package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

// fakeEngine is a Docker Engine API stand-in for the calls DockerRuntime
// makes, keeping containers in memory: enough to test the runtime's
// choreography (pull by digest, create with labels, start, replace, remove)
// where no engine runs. TestDockerRuntimeRealEngine runs the same runtime
// against a real engine where one exists.
type fakeEngine struct {
	mu         sync.Mutex
	pulled     []string
	containers map[string]*fakeContainer
	n          int
	pullFail   string
}

type fakeContainer struct {
	Image   string
	Labels  map[string]string
	Env     []string
	Cmd     []string
	Status  string
	Removed bool
}

func newFakeEngine(t *testing.T) (*fakeEngine, string) {
	e := &fakeEngine{containers: map[string]*fakeContainer{}}
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
		e.n++
		id := fmt.Sprintf("c%d", e.n)
		c.Status = "created"
		e.containers[id] = &c
		_ = json.NewEncoder(w).Encode(map[string]string{"Id": id})
	case strings.HasPrefix(path, "/containers/"):
		parts := strings.Split(strings.TrimPrefix(path, "/containers/"), "/")
		c, ok := e.containers[parts[0]]
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
			_ = json.NewEncoder(w).Encode(map[string]any{"State": map[string]any{"Status": c.Status}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
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
	deadline := time.After(waitLimit)
	for {
		s.mu.Lock()
		done := true
		for _, m := range modules {
			done = done && s.last[m].State == state
		}
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-s.ch:
		case <-deadline:
			t.Fatalf("modules %v did not reach %s: %+v", modules, state, s.last)
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
	require.Equal(t, []string{"GEN=1"}, live["web"].Env)
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
	require.Empty(t, e.live(), "close stops and removes what the runtime started")
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

// TestDockerRuntimeRealEngine needs a Docker or Podman engine; none runs on
// meshroll's CI machines, so there it is skipped, saying so.
func TestDockerRuntimeRealEngine(t *testing.T) {
	sock := os.Getenv("MESHROLL_DOCKER_SOCKET")
	if sock == "" {
		sock = DefaultDockerSocket
	}
	r := NewDockerRuntime("meshroll-test", sock)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Ping(ctx); err != nil {
		t.Skipf("no Docker engine at %s (set MESHROLL_DOCKER_SOCKET to test against one): %v", sock, err)
	}
	t.Log("a real engine answers; the image-pulling test needs an image by digest: set MESHROLL_DOCKER_TEST_IMAGE=repo@sha256:...")
	ref := os.Getenv("MESHROLL_DOCKER_TEST_IMAGE")
	if ref == "" {
		t.Skip("MESHROLL_DOCKER_TEST_IMAGE not set")
	}
	repo, digest, ok := strings.Cut(ref, "@")
	require.True(t, ok, "MESHROLL_DOCKER_TEST_IMAGE must be repo@sha256:...")
	s := newStates()
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{{Module: "probe", Digest: digest, Image: repo, Generation: 1}}, s.update))
	s.waitFor(t, mesh.StateRunning, "probe")
	require.NoError(t, r.Close(context.Background()))
}
