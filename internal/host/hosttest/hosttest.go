// Package hosttest is an in-process host agent for tests. It serves the real
// host API (host.NewHandler over a host.Ledger, the very rules the agent
// runs) from an httptest server and keeps containers in memory, so unit tests
// and integration tests against a real Temporal server exercise the same
// refusals, repeats and floor the machine workflow meets in production. Knobs
// make the awkward cases deterministic: a host that is down, containers that
// crash-loop or stay starting, slow answers and overlapping pushes.
package hosttest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// Option configures a Host.
type Option func(*config)

type config struct {
	token      string
	applyDelay time.Duration
	startAfter int
}

// WithToken makes the host require "Authorization: Bearer <token>", as an
// agent with a configured token does.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithApplyDelay makes every POST /v1/declarations take d after the
// declaration is judged (and, if accepted, recorded) before it answers. It
// widens race windows so that overlapping pushes are observed, and with a
// client timeout shorter than d it simulates an answer lost after the host
// recorded the declaration. The wait ends early when the caller goes away.
func WithApplyDelay(d time.Duration) Option { return func(c *config) { c.applyDelay = d } }

// WithStartAfterReports makes newly started containers report "starting" for
// the first n report reads after the apply, then "running" (or
// "crash-looping"), so tests can exercise waiting without sleeping.
func WithStartAfterReports(n int) Option { return func(c *config) { c.startAfter = n } }

// Host is a fake host agent for one machine. All methods are safe for
// concurrent use.
type Host struct {
	t       testing.TB
	machine string
	cfg     config
	srv     *httptest.Server

	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu         sync.Mutex
	ledger     host.Ledger
	containers []*container // sorted by module
	applied    []mesh.Declaration
	received   []mesh.Declaration
	down       bool
	hold       bool
	crash      map[string]bool // by module, or by digest
	reads      int
}

type container struct {
	spec mesh.Container
	rc   mesh.RunningContainer
	// pending is how many more report reads show it starting.
	pending int
	// floored is set once the container raised its module's floor.
	floored bool
}

// New starts a host for machine on an httptest server that is closed when
// the test ends.
func New(t testing.TB, machine string, opts ...Option) *Host {
	t.Helper()
	if err := mesh.ValidName("machine", machine); err != nil {
		t.Fatalf("hosttest: %v", err)
	}
	h := &Host{
		t:       t,
		machine: machine,
		ledger:  host.Ledger{Machine: machine},
		crash:   make(map[string]bool),
	}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.srv = httptest.NewServer(h.handler())
	t.Cleanup(h.srv.Close)
	return h
}

// handler puts the fault knobs in front of the shared host handler.
func (h *Host) handler() http.Handler {
	api := host.NewHandler(agent{h}, h.cfg.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		down := h.down
		h.mu.Unlock()
		if down {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"host is down (hosttest)","last_seq":0}}`+"\n")
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == host.PathDeclarations {
			// Counted before any lock, so overlapping callers are seen even
			// though the host then serialises them.
			n := h.inFlight.Add(1)
			defer h.inFlight.Add(-1)
			for {
				m := h.maxInFlight.Load()
				if n <= m || h.maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
		}
		api.ServeHTTP(w, r)
	})
}

// URL is the host's base URL, for host.NewHTTPClient or a worker's config.
func (h *Host) URL() string { return h.srv.URL }

// Machine is the machine the host answers for.
func (h *Host) Machine() string { return h.machine }

// Client returns a client for this host with its token, for tests that set
// the host up over the wire.
func (h *Host) Client() *host.HTTPClient {
	h.t.Helper()
	c, err := host.NewHTTPClient(h.URL(), h.cfg.token, nil)
	if err != nil {
		h.t.Fatalf("hosttest: %v", err)
	}
	return c
}

// Seed sets what runs before any declaration, replacing containers of the
// same modules. State defaults to running; a running seed sets its module's
// floor, as a container the agent saw reach running would.
func (h *Host) Seed(cs ...mesh.RunningContainer) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rc := range cs {
		if err := mesh.ValidName("module", rc.Module); err != nil {
			h.t.Fatalf("hosttest: seed: %v", err)
		}
		if err := mesh.ValidDigest(rc.Digest); err != nil {
			h.t.Fatalf("hosttest: seed %s: %v", rc.Module, err)
		}
		if rc.State == "" {
			rc.State = mesh.StateRunning
		}
		if rc.Since == "" {
			rc.Since = now()
		}
		c := &container{
			spec: rc.Declared(),
			rc:   rc,
		}
		h.containers = slices.DeleteFunc(h.containers, func(o *container) bool { return o.rc.Module == rc.Module })
		h.containers = append(h.containers, c)
		if rc.State == mesh.StateRunning {
			h.ledger.Ran(rc)
		}
	}
	sortContainers(h.containers)
}

// Applied returns every declaration the host applied, in order; repeats and
// refusals are not in it.
func (h *Host) Applied() []mesh.Declaration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cloneAll(h.applied)
}

// Received returns every declaration POSTed and decoded, in order, whatever
// the answer. Requests refused before decoding (bad token, malformed body,
// host down) are not in it.
func (h *Host) Received() []mesh.Declaration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cloneAll(h.received)
}

// MaxInFlight is the largest number of POST /v1/declarations ever handled at
// once. The machine workflow is the only writer, so anything above 1 means
// pushes to this machine overlapped.
func (h *Host) MaxInFlight() int { return int(h.maxInFlight.Load()) }

// Report is the host's report as a read would return it now. Unlike a read
// over HTTP it does not count toward WithStartAfterReports.
func (h *Host) Report() mesh.Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reportLocked()
}

// Floor is the host's floor for module: the container that last reached
// running.
func (h *Host) Floor(module string) (host.Mark, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.ledger.Floor[module]
	return m, ok
}

// SetDown makes every request, health check included, answer 503 while down
// is true, as a host the client cannot use. Nothing reaches the agent then.
func (h *Host) SetDown(down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = down
}

// SetCrash makes containers of module that start from now on go to
// crash-looping instead of running. It changes nothing already running or
// crash-looping: a crash-looping container stays so until a declaration
// replaces it, so clearing the fault before a rollback does not quietly let
// the broken build run and raise the floor.
//
// module may also be a digest, to make only that build crash: a bad build
// whose revert to the build before must run.
func (h *Host) SetCrash(module string, crash bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.crash[module] = crash
}

// HoldStart keeps newly started containers "starting" while hold is true, so
// a test decides exactly when a push finishes. Releasing lets held
// containers proceed at once (once their WithStartAfterReports reads are
// used up).
func (h *Host) HoldStart(hold bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = hold
	h.settleLocked()
}

// agent is the in-process host.Client the shared handler serves.
type agent struct{ h *Host }

func (a agent) Report(context.Context) (mesh.Report, error) {
	h := a.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	h.raiseFloorsLocked()
	rep := h.reportLocked()
	for _, c := range h.containers {
		if c.rc.State == mesh.StateStarting && c.pending > 0 {
			c.pending--
		}
	}
	h.settleLocked()
	return rep, nil
}

func (a agent) Apply(ctx context.Context, d mesh.Declaration) (host.ApplyResult, error) {
	h := a.h
	h.mu.Lock()
	h.received = append(h.received, host.CloneDeclaration(d))
	repeat, err := h.ledger.Admit(h.reportLocked().Containers, d)
	if err == nil && !repeat {
		h.applyLocked(d)
	}
	h.mu.Unlock()

	if h.cfg.applyDelay > 0 {
		t := time.NewTimer(h.cfg.applyDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err != nil {
		return host.ApplyResult{}, err
	}
	return host.ApplyResult{Seq: d.Seq, Repeat: repeat}, nil
}

// applyLocked makes the declared containers the host's. A container whose
// spec is unchanged and running keeps running; every other one starts.
// Modules not declared are removed.
func (h *Host) applyLocked(d mesh.Declaration) {
	d = host.CloneDeclaration(d)
	ts := now()
	var next []*container
	for _, spec := range d.Containers {
		rc := mesh.RunningContainer{
			Module: spec.Module, Digest: spec.Digest, Generation: spec.Generation,
			Plan: d.Plan, Seq: d.Seq, State: mesh.StateStarting, Since: ts,
			Commit: spec.Commit, Image: spec.Image, Args: spec.Args, Env: spec.Env,
			Check: spec.Health, Health: mesh.HealthUnknown,
		}
		c := &container{spec: spec, rc: rc, pending: h.cfg.startAfter}
		if old := h.findLocked(spec.Module); old != nil && old.rc.State == mesh.StateRunning && mesh.SameSpec(old.spec, spec) {
			c.rc.State, c.rc.Since, c.pending = mesh.StateRunning, old.rc.Since, 0
			c.rc.Health, c.rc.HealthySince, c.rc.Restarts, c.rc.LastProbe = old.rc.Health, old.rc.HealthySince, old.rc.Restarts, old.rc.LastProbe
		}
		next = append(next, c)
	}
	sortContainers(next)
	h.containers = next
	h.ledger.Record(d)
	h.applied = append(h.applied, d)
	h.settleLocked()
}

// settleLocked moves starting containers on once nothing holds them.
func (h *Host) settleLocked() {
	if h.hold {
		return
	}
	for _, c := range h.containers {
		if c.rc.State != mesh.StateStarting || c.pending > 0 {
			continue
		}
		if h.crash[c.rc.Module] || h.crash[c.rc.Digest] {
			c.rc.State, c.rc.Since = mesh.StateCrashLooping, now()
			continue
		}
		h.toRunningLocked(c)
	}
}

// toRunningLocked starts c, healthy at once: a test that wants it otherwise
// says so with SetHealth. As the real agent does, a container without a
// check raises its floor by running; one with a check, once it has been
// healthy for its MinHealthy (see raiseFloorsLocked).
func (h *Host) toRunningLocked(c *container) {
	ts := now()
	c.rc.State, c.rc.Since = mesh.StateRunning, ts
	c.rc.Health, c.rc.HealthySince = mesh.HealthHealthy, ts
	if c.spec.Health == nil {
		h.ledger.Ran(c.rc)
		c.floored = true
	}
	h.raiseFloorsLocked()
}

// raiseFloorsLocked raises the floor of every running container with a
// check that has been healthy for its MinHealthy, as of now.
func (h *Host) raiseFloorsLocked() {
	for _, c := range h.containers {
		if c.floored || c.spec.Health == nil || c.rc.State != mesh.StateRunning || c.rc.Health != mesh.HealthHealthy {
			continue
		}
		since, err := time.Parse(time.RFC3339Nano, c.rc.HealthySince)
		if err == nil && time.Since(since) >= c.spec.Health.MinHealthy() {
			h.ledger.Ran(c.rc)
			c.floored = true
		}
	}
}

// SetHealth sets what the host reports of module's health, and its last
// probe: becoming healthy starts a new healthy_since, anything else clears
// it, as an agent judging a probe would.
func (h *Host) SetHealth(module, health string, probe *mesh.ProbeResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.findLocked(module)
	if c == nil {
		h.t.Fatalf("hosttest: SetHealth: no container of %s", module)
	}
	if health == mesh.HealthHealthy && c.rc.Health != mesh.HealthHealthy {
		c.rc.HealthySince = now()
	} else if health != mesh.HealthHealthy {
		c.rc.HealthySince = ""
	}
	c.rc.Health, c.rc.LastProbe = health, probe
}

// Restart makes module's container restart, as a runtime does after a
// crash: it counts a restart and starts a new healthy_since.
func (h *Host) Restart(module string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.findLocked(module)
	if c == nil {
		h.t.Fatalf("hosttest: Restart: no container of %s", module)
	}
	ts := now()
	c.rc.Restarts++
	c.rc.Since = ts
	if c.rc.Health == mesh.HealthHealthy {
		c.rc.HealthySince = ts
	}
}

// Reads is how many times the report has been read, so that a test can act
// once a caller has seen something (a push its container healthy).
func (h *Host) Reads() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reads
}

func (h *Host) findLocked(module string) *container {
	for _, c := range h.containers {
		if c.rc.Module == module {
			return c
		}
	}
	return nil
}

func (h *Host) reportLocked() mesh.Report {
	running := make([]mesh.RunningContainer, 0, len(h.containers))
	for _, c := range h.containers {
		running = append(running, c.rc)
	}
	return h.ledger.Report(running)
}

func sortContainers(cs []*container) {
	slices.SortFunc(cs, func(a, b *container) int { return strings.Compare(a.rc.Module, b.rc.Module) })
}

func cloneAll(ds []mesh.Declaration) []mesh.Declaration {
	out := make([]mesh.Declaration, len(ds))
	for i, d := range ds {
		out[i] = host.CloneDeclaration(d)
	}
	return out
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }
