package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Docker labels meshroll puts on the containers it creates, so that it finds
// its own containers again and never touches anyone else's.
const (
	labelMachine = "io.meshroll.machine"
	labelModule  = "io.meshroll.module"
	labelSpec    = "io.meshroll.spec"
	// labelDeclared holds the container as declared (mesh.Container as
	// JSON), so that an agent that lost its state finds what runs and how
	// it was declared (Find).
	labelDeclared = "io.meshroll.declared"
)

// DefaultDockerSocket is where the Docker engine (or Podman's compatible
// service) listens on a typical machine.
const DefaultDockerSocket = "/var/run/docker.sock"

// DockerRuntime runs declared containers through the Docker Engine API, so
// that a machine with Docker or Podman runs exactly the images the
// declaration pins by digest. It speaks the API's JSON over HTTP itself
// (create, start, inspect, stop, remove, pull, exec) rather than taking the
// Docker client library and its dependencies into the agent.
//
// A container declared on the host network (mesh.NetworkHost) shares the
// machine's, so the agent's http or tcp probe reaches it where it reaches
// an exec runtime's process; one on the bridge (the default) has its probe
// port (the one the agent picked, for mesh.PortAuto) published on
// 127.0.0.1 under the same number (the process listens on the container's
// address, which the published port reaches, not on the container's
// loopback). An exec probe runs in the container through the engine's exec
// API either way.
type DockerRuntime struct {
	machine string
	hc      *http.Client
	base    string
	// poll is how often a followed container is inspected when the engine
	// says nothing of it (dockerSafetyPoll).
	poll time.Duration
	// events is the engine's event stream, which wakes the followers.
	events *eventFeed
	// registryHost and registryAuth are the registry whose images are
	// pulled with credentials, and the X-Registry-Auth value that carries
	// them (WithRegistry).
	registryHost, registryAuth string

	mu      sync.Mutex
	closed  bool
	current map[string]*dockerContainer
	// swept is set once the first Apply that declares anything has set
	// out to remove the containers labelled for this machine that its
	// declaration does not name (left by an agent stopped mid-replace).
	swept  bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type dockerContainer struct {
	spec mesh.Container
	id   string
	hash string
	// state, since and restarts are the last reported, under the
	// runtime's mu.
	state    string
	since    time.Time
	restarts int
	// revived counts the runtime's own starts of the container after it
	// stopped for good (see reviver), which the engine's restart count
	// leaves out.
	revived int
}

var (
	_ Runtime   = (*DockerRuntime)(nil)
	_ Execer    = (*DockerRuntime)(nil)
	_ Confirmer = (*DockerRuntime)(nil)
)

// NewDockerRuntime returns a runtime for machine talking to the engine at
// socket (a unix socket path) or, when socket starts with http://, at that
// URL.
func NewDockerRuntime(machine, socket string) *DockerRuntime {
	r := &DockerRuntime{machine: machine, poll: dockerSafetyPoll, current: map[string]*dockerContainer{}}
	r.events = newEventFeed(r.openEvents)
	if strings.HasPrefix(socket, "http://") {
		r.base, r.hc = strings.TrimRight(socket, "/"), &http.Client{}
		return r
	}
	if socket == "" {
		socket = DefaultDockerSocket
	}
	r.base = "http://docker"
	r.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	return r
}

// Name is RuntimeDocker.
func (r *DockerRuntime) Name() string { return RuntimeDocker }

// Ping checks the engine answers, so that the agent refuses to start on a
// machine without one instead of failing every declaration.
func (r *DockerRuntime) Ping(ctx context.Context) error {
	if err := r.call(ctx, http.MethodGet, "/_ping", nil, nil); err != nil {
		return fmt.Errorf("runtime docker: no engine answers: %w", err)
	}
	return nil
}

// Apply keeps containers whose spec is unchanged, replaces changed ones
// (pull by digest, create, start, then stop and remove the old one) and
// removes those no longer declared. Pulls and starts run in the background;
// each container's state is then followed (follow).
func (r *DockerRuntime) Apply(ctx context.Context, cs []mesh.Container, update func(Update)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("runtime docker: closed")
	}
	if r.cancel != nil {
		r.cancel()
	}
	wctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel

	next := map[string]*dockerContainer{}
	for _, c := range cs {
		hash := c.SpecHash()
		if old, ok := r.current[c.Module]; ok && old.hash == hash && old.id != "" {
			next[c.Module] = old
			update(Update{Module: c.Module, State: old.state, Since: old.since, Restarts: old.restarts})
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.follow(wctx, old, update)
			}()
			continue
		}
		dc := &dockerContainer{spec: c, hash: hash, state: mesh.StateStarting, since: time.Now().UTC()}
		next[c.Module] = dc
		update(Update{Module: c.Module, State: dc.state, Since: dc.since})
		r.wg.Add(1)
		go r.start(wctx, dc, r.current[c.Module], update)
	}
	if !r.swept && len(cs) > 0 {
		// An agent with nothing declared (new, or its state lost) leaves
		// what runs alone until it is told what should.
		r.swept = true
		r.wg.Add(1)
		go r.sweep(wctx, next)
	}
	for m, old := range r.current {
		if _, ok := next[m]; !ok && old.id != "" {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.remove(context.Background(), old.id)
			}()
		}
	}
	r.current = next
	return nil
}

// start pulls, creates and starts dc, then retires old and follows dc.
func (r *DockerRuntime) start(ctx context.Context, dc *dockerContainer, old *dockerContainer, update func(Update)) {
	defer r.wg.Done()
	c := dc.spec
	fail := func(err error) {
		if ctx.Err() == nil {
			r.report(dc, Update{Module: c.Module, State: mesh.StateExited, Since: time.Now().UTC(), Reason: err.Error()}, update)
		}
	}
	if c.Image == "" {
		fail(fmt.Errorf("container %s names no image repository to pull %s from", c.Module, c.Digest))
		return
	}
	name := containerName(r.machine, c.Module, dc.hash)
	if id, err := r.adopt(ctx, name, dc.hash); err != nil {
		fail(err)
		return
	} else if id != "" {
		if old != nil && old.id != "" && old.id != id {
			r.remove(ctx, old.id)
		}
		r.mu.Lock()
		dc.id = id
		r.mu.Unlock()
		r.follow(ctx, dc, update)
		return
	}
	ref := c.Image + "@" + c.Digest
	if err := r.pullRetrying(ctx, dc, ref, update); err != nil {
		fail(err)
		return
	}
	body := createBody(r.machine, c, ref, dc.hash)
	var created struct {
		ID string `json:"Id"`
	}
	if err := r.call(ctx, http.MethodPost, "/containers/create?"+url.Values{"name": {name}}.Encode(), body, &created); err != nil {
		fail(fmt.Errorf("create %s: %w", c.Module, err))
		return
	}
	if old != nil && old.id != "" {
		r.remove(ctx, old.id)
	}
	if err := r.call(ctx, http.MethodPost, "/containers/"+created.ID+"/start", nil, nil); err != nil {
		fail(fmt.Errorf("start %s: %w", c.Module, err))
		return
	}
	r.mu.Lock()
	dc.id = created.ID
	r.mu.Unlock()
	r.follow(ctx, dc, update)
}

// follow inspects the container until ctx ends, reporting each change of
// state and each restart the engine counts. It looks when the engine's
// events say something happened to the container (see eventFeed), when
// the reviver's wait ends, and every r.poll whatever happens.
//
// The engine restarts a crashed container (restart policy on-failure)
// within a moment, which the runtime then sees only by its restart count;
// the push judges a container healthy from the host's report, so the look
// must come well inside the shortest min_healthy a crash should fail: the
// die and start events bring it at once.
func (r *DockerRuntime) follow(ctx context.Context, dc *dockerContainer, update func(Update)) {
	r.mu.Lock()
	last, restarts, id := dc.state, dc.restarts, dc.id
	r.mu.Unlock()
	wake, unwatch := r.events.watch(id)
	defer unwatch()
	rv := reviver{wait: reviveFirst}
	t := time.NewTimer(r.poll)
	defer t.Stop()
	for {
		var st struct {
			State struct {
				Status     string `json:"Status"`
				Restarting bool   `json:"Restarting"`
				ExitCode   int    `json:"ExitCode"`
				Error      string `json:"Error"`
				StartedAt  string `json:"StartedAt"`
			} `json:"State"`
			RestartCount int `json:"RestartCount"`
		}
		err := r.call(ctx, http.MethodGet, "/containers/"+id+"/json", nil, &st)
		if isNotFound(err) && ctx.Err() == nil {
			r.recreate(ctx, dc, update)
			return
		}
		if err == nil {
			st.RestartCount += r.revivals(dc)
			state, reason := mesh.StateStarting, ""
			switch {
			case st.State.Restarting || (st.RestartCount > 0 && st.State.Status != "running"):
				state, reason = mesh.StateCrashLooping, fmt.Sprintf("exit code %d, restarted %d times", st.State.ExitCode, st.RestartCount)
			case st.State.Status == "running":
				state = mesh.StateRunning
			case st.State.Status == "exited" || st.State.Status == "dead":
				state, reason = mesh.StateExited, fmt.Sprintf("exit code %d %s", st.State.ExitCode, st.State.Error)
			}
			stopped := (st.State.Status == "exited" || st.State.Status == "dead") && !st.State.Restarting
			if stopped {
				rv.ranCalm(time.Now())
				reason += fmt.Sprintf("; the engine will not start it again: starting it in %s", rv.wait)
			}
			if (state != last || st.RestartCount != restarts) && ctx.Err() == nil {
				last, restarts = state, st.RestartCount
				since := time.Now().UTC()
				if started, err := time.Parse(time.RFC3339Nano, st.State.StartedAt); err == nil && state == mesh.StateRunning && started.Before(since) {
					// Running since the engine started it: an adopted
					// container has run since before this agent.
					since = started.UTC()
				}
				r.report(dc, Update{Module: dc.spec.Module, State: state, Since: since, Reason: strings.TrimSpace(reason), Restarts: restarts}, update)
			}
			rv.look(ctx, r, dc, stopped, time.Now())
		}
		next := r.poll
		if d := rv.due(time.Now()); d > 0 {
			next = min(next, d)
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// idOf is the engine's ID of module's container, "" before it was created.
func (r *DockerRuntime) idOf(module string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if dc := r.current[module]; dc != nil {
		return dc.id
	}
	return ""
}

// Unbroken inspects module's container now: it runs, and the engine has
// restarted it no more than restarts times (see Confirmer).
func (r *DockerRuntime) Unbroken(ctx context.Context, module string, restarts int) (bool, error) {
	id := r.idOf(module)
	if id == "" {
		return false, nil
	}
	var st struct {
		State struct {
			Running bool `json:"Running"`
		} `json:"State"`
		RestartCount int `json:"RestartCount"`
	}
	if err := r.call(ctx, http.MethodGet, "/containers/"+id+"/json", nil, &st); err != nil {
		return false, fmt.Errorf("inspect %s: %w", module, err)
	}
	return st.State.Running && st.RestartCount+r.revivalsOf(module) <= restarts, nil
}

// report records and passes on a state change of dc.
//
// A restart the engine counts starts the container's time in its state
// anew, even when both inspections saw it running: the engine restarts a
// crashed container within the poll, so a container that crashes every few
// seconds would otherwise look running since its first start, and a
// health check with no probe would count it healthy for min_healthy.
func (r *DockerRuntime) report(dc *dockerContainer, u Update, update func(Update)) {
	r.mu.Lock()
	if dc.state != u.State || dc.restarts != u.Restarts {
		dc.since = u.Since
	}
	dc.state, dc.restarts = u.State, u.Restarts
	u.Since = dc.since
	r.mu.Unlock()
	update(u)
}

// remove stops a container (SIGTERM, then SIGKILL after the stop grace it
// was created with: its StopTimeout, or the engine's 10 seconds) and
// removes it. Its volumes are never removed (no v=1): a named volume is
// the data the next build of the module mounts.
func (r *DockerRuntime) remove(ctx context.Context, id string) {
	_ = r.call(ctx, http.MethodPost, "/containers/"+id+"/stop", nil, nil)
	_ = r.call(ctx, http.MethodDelete, "/containers/"+id+"?force=1", nil, nil)
}

// Close stops following containers and leaves them running: an agent
// stopped for an upgrade, or by a service manager, must not bounce the
// machine's services. The next runtime on the machine adopts them (see
// adopt), and removes what its first declaration no longer names.
func (r *DockerRuntime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	if r.cancel != nil {
		r.cancel()
	}
	r.current = map[string]*dockerContainer{}
	r.mu.Unlock()
	if err := waitGroup(ctx, &r.wg, "runtime docker: close"); err != nil {
		return err
	}
	return r.events.close(ctx)
}

// call does one Engine API request (see request) and decodes its answer
// into out.
func (r *DockerRuntime) call(ctx context.Context, method, path string, in, out any) error {
	return r.callWith(ctx, method, path, in, out, nil)
}

// callWith is call with header added to the request.
func (r *DockerRuntime) callWith(ctx context.Context, method, path string, in, out any, header http.Header) error {
	resp, err := r.requestWith(ctx, method, path, in, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified {
		return nil
	}
	if out == nil {
		// The pull answers a stream of progress objects; an error in it
		// arrives as {"error": ...}.
		dec := json.NewDecoder(resp.Body)
		for {
			var m struct {
				Error string `json:"error"`
			}
			if err := dec.Decode(&m); err != nil {
				return nil
			}
			if m.Error != "" {
				return errors.New(m.Error)
			}
		}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// request does one Engine API request with in as its JSON body; a non-2xx
// answer is an error with the engine's message (304, "already
// started/stopped", counts as success). The caller closes the answer's body.
func (r *DockerRuntime) request(ctx context.Context, method, path string, in any) (*http.Response, error) {
	return r.requestWith(ctx, method, path, in, nil)
}

// requestWith is request with header added.
func (r *DockerRuntime) requestWith(ctx context.Context, method, path string, in any, header http.Header) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotModified {
		defer resp.Body.Close()
		var e struct {
			Message string `json:"message"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		return nil, &engineError{method: method, path: strings.SplitN(path, "?", 2)[0], status: resp.StatusCode, message: e.Message}
	}
	return resp, nil
}
