package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/agent/execrt"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
)

// Runtime names the agent accepts (see NewRuntime).
const (
	// RuntimeNoop runs nothing and reports every declared container running.
	RuntimeNoop = "noop"
	// RuntimeExec pulls images by digest and supervises their entrypoints as
	// child processes (package execrt).
	RuntimeExec = execrt.Name
	// RuntimeDocker runs containers through the Docker Engine API (Docker,
	// or Podman's compatible service).
	RuntimeDocker = "docker"
)

// ErrUnknownRuntime is returned by NewRuntime for a name it does not know; it
// is a usage error, unlike a runtime that cannot start (no Docker engine, a
// bad registry setting).
var ErrUnknownRuntime = errors.New("unknown runtime")

// Runtime runs the containers of the current declaration. The agent owns the
// declaration, the ledger and the journal; a runtime only turns a list of
// containers into processes and says how they fare, so that exec, docker and
// noop differ in nothing the machine workflow can observe but the containers'
// states.
//
// The agent calls Apply and Close from one goroutine at a time, in the order
// declarations were recorded.
type Runtime interface {
	// Name is the runtime's name as the agent reports and journals it.
	Name() string
	// Apply makes the runtime run exactly cs: start what is new, replace
	// what changed, stop what is no longer declared and keep what is
	// unchanged. It returns once the work is under way, never waiting for a
	// container to run, because the agent answers a declaration once it is
	// recorded and the caller polls the report. ctx bounds the call, not the
	// containers' lives.
	//
	// By the time Apply returns, the runtime has reported the state of
	// every container of cs through update (starting, or running for one it
	// kept), and it reports every change after that, in order for any one
	// container, until the next Apply or Close. Only the runtime knows what
	// it kept, so the agent's own guess never stands unconfirmed. update may
	// be called from any goroutine, also during Apply, and must not call the
	// runtime; the agent ignores calls belonging to a superseded Apply. An
	// error means the runtime could not take cs at all; the agent then
	// reports the containers exited and journals why.
	Apply(ctx context.Context, cs []mesh.Container, update func(Update)) error
	// Close stops every container the runtime started and returns once no
	// more updates will be made.
	Close(ctx context.Context) error
}

// Checker is a Runtime that can tell, before anything is recorded, that it
// cannot run containers as declared (a setting it does not honour), so
// that the host refuses the push naming the setting rather than journalling
// a declaration it will not carry out. The error says which container and
// setting, and what to declare instead.
type Checker interface {
	Check(cs []mesh.Container) error
}

// Finder is a Runtime whose containers outlive the agent and carry how they
// were declared (the docker runtime's labels). An agent started on an empty
// state directory (wiped, or a new disk, with the engine's containers still
// there) asks it what runs, keeps that running and reports it, instead of
// reporting an empty machine that runs services. Find returns one container
// per module, as declared.
type Finder interface {
	Find(ctx context.Context) ([]mesh.Container, error)
}

// Confirmer is a Runtime that follows its containers by looking at them
// now and then, so that its last report may be a look old. Before counting
// a container healthy for min_healthy (raising its module's floor, which
// no push goes below), the agent asks it whether the container still runs
// without a restart beyond those reported: a container that crashed and
// was restarted since the last look must not count.
type Confirmer interface {
	Unbroken(ctx context.Context, module string, restarts int) (bool, error)
}

// Update is one container's state as its runtime sees it (see
// execrt.Update, where it is defined so that the exec runtime reports with
// it without importing this package).
type Update = execrt.Update

// Execer is a Runtime that can run a command in a container's environment,
// which is what an exec probe asks for: the exec runtime runs it beside the
// process, the docker runtime through the engine's exec API. A runtime
// without it fails every exec probe, saying so.
type Execer interface {
	// Exec runs argv in module's container and waits for it, writing its
	// output to out. It returns the exit code of a command that ran, and an
	// error for one that could not run or outlived ctx.
	Exec(ctx context.Context, module string, argv []string, out io.Writer) (int, error)
}

// LogReader is a Runtime that keeps its containers' output and can hand it
// out, which is what the host API's logs (host.PathLogs) ask for: the exec
// runtime from the log file it writes each process's output to, the docker
// runtime through the engine's logs API. A runtime without it (noop) is
// answered 501 unsupported, saying so.
type LogReader interface {
	// Logs writes the last tail lines of module's output to out and, with
	// follow, what the container writes next, until ctx ends or the
	// container is stopped, replaced or removed. Before it writes it may
	// refuse with a *host.Refusal (a container that has not started); once
	// it knows it will stream it calls host.Flush(out).
	Logs(ctx context.Context, module string, tail int, follow bool, out io.Writer) error
}

// RuntimeOptions configures NewRuntime.
type RuntimeOptions struct {
	// StartDelay is how long the noop runtime reports a container starting
	// before it reports it running. Zero reports it running at once.
	StartDelay time.Duration
	// Machine names the machine, for the docker runtime's container labels
	// and every runtime's mesh.EnvMachine.
	Machine string
	// DockerSocket is the Docker engine's unix socket (default
	// DefaultDockerSocket) or an http:// URL.
	DockerSocket string

	// StateDir is where the exec runtime keeps its image cache and the
	// containers' logs: the agent's own state directory, so that one
	// directory is all a machine's agent owns.
	StateDir string
	// Registry authenticates the exec and docker runtimes' pulls from the
	// registry it names (images elsewhere are pulled anonymously, or as
	// the engine is configured).
	Registry registry.Options
	// StopGrace is how long the exec runtime gives a stopped process
	// between SIGTERM and SIGKILL (default execrt.DefaultStopGrace).
	StopGrace time.Duration
	// HealthyAfter is how long an exec process must stay up to be reported
	// running (default execrt.DefaultHealthyAfter).
	HealthyAfter time.Duration
}

// NewRuntime returns the runtime called name. The docker runtime fails when
// no engine answers, and the exec runtime when its state directory or
// registry options are unusable, so that the agent refuses to start rather
// than fail every declaration.
func NewRuntime(name string, o RuntimeOptions) (Runtime, error) {
	if o.Machine == "" && (name == RuntimeDocker || name == RuntimeExec) {
		return nil, fmt.Errorf("runtime %s: no machine named (it labels containers and passes %s)", name, mesh.EnvMachine)
	}
	switch name {
	case RuntimeNoop:
		if o.StartDelay < 0 {
			return nil, fmt.Errorf("runtime noop: start delay %s is negative", o.StartDelay)
		}
		return NewNoopRuntime(o.StartDelay), nil
	case RuntimeDocker:
		r, err := NewDockerRuntime(o.Machine, o.DockerSocket).WithRegistry(o.Registry)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Ping(ctx); err != nil {
			return nil, fmt.Errorf("%w (is Docker or Podman's service running? --docker-socket names another socket)", err)
		}
		return r, nil
	case RuntimeExec:
		r, err := execrt.New(execrt.Options{Machine: o.Machine, StateDir: o.StateDir, Registry: o.Registry, StopGrace: o.StopGrace, HealthyAfter: o.HealthyAfter})
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, fmt.Errorf("%w %q (want %s, %s or %s)", ErrUnknownRuntime, name, RuntimeNoop, RuntimeExec, RuntimeDocker)
}

var (
	_ Runtime   = (*execrt.Runtime)(nil)
	_ Execer    = (*execrt.Runtime)(nil)
	_ LogReader = (*execrt.Runtime)(nil)
	_ LogReader = (*DockerRuntime)(nil)
)

// NoopRuntime runs nothing. It reports each declared container starting for
// its start delay and then running, which is enough to try meshroll's
// roll-outs, floors and journal on a machine without images. It is honest
// about it: the agent names the runtime in every answer's Meshroll-Runtime
// header, in the journal and in its log, so nobody mistakes it for a machine
// running code.
type NoopRuntime struct {
	delay time.Duration
	// gate, when set (tests only), is waited on before a container is
	// reported running; an error (ctx ended) abandons the start.
	gate func(ctx context.Context, c mesh.Container) error

	mu      sync.Mutex
	closed  bool
	current map[string]noopContainer
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type noopContainer struct {
	spec    mesh.Container
	running bool
	since   time.Time
}

var _ Runtime = (*NoopRuntime)(nil)

// NewNoopRuntime returns a noop runtime that reports a container running
// startDelay after it was declared.
func NewNoopRuntime(startDelay time.Duration) *NoopRuntime {
	return &NoopRuntime{delay: startDelay, current: make(map[string]noopContainer)}
}

// Name is RuntimeNoop.
func (r *NoopRuntime) Name() string { return RuntimeNoop }

// Apply keeps running containers whose spec is unchanged and "starts" the
// others; containers no longer declared are forgotten.
func (r *NoopRuntime) Apply(_ context.Context, cs []mesh.Container, update func(Update)) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errors.New("runtime noop: closed")
	}
	if r.cancel != nil {
		r.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	// Updates are made with r.mu held, here and in start, so that for any
	// one container they arrive in the order they happened.
	defer r.mu.Unlock()
	next := make(map[string]noopContainer, len(cs))
	for _, c := range cs {
		if old, ok := r.current[c.Module]; ok && old.running && mesh.SameSpec(old.spec, c) {
			next[c.Module] = old
			update(Update{Module: c.Module, State: mesh.StateRunning, Since: old.since})
			continue
		}
		next[c.Module] = noopContainer{spec: c}
		update(Update{Module: c.Module, State: mesh.StateStarting, Since: time.Now().UTC()})
		r.wg.Add(1)
		go r.start(ctx, c, update)
	}
	r.current = next
	return nil
}

func (r *NoopRuntime) start(ctx context.Context, c mesh.Container, update func(Update)) {
	defer r.wg.Done()
	if r.delay > 0 {
		t := time.NewTimer(r.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	if r.gate != nil {
		if err := r.gate(ctx, c); err != nil {
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.current[c.Module]
	if ctx.Err() != nil || !ok || !mesh.SameSpec(cur.spec, c) {
		return
	}
	cur.running, cur.since = true, time.Now().UTC()
	r.current[c.Module] = cur
	update(Update{Module: c.Module, State: mesh.StateRunning, Since: cur.since})
}

// Close abandons pending starts and waits until no update can follow.
func (r *NoopRuntime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	if r.cancel != nil {
		r.cancel()
	}
	r.current = map[string]noopContainer{}
	r.mu.Unlock()
	return waitGroup(ctx, &r.wg, "runtime noop: close")
}

// waitGroup waits for wg until ctx ends, so that a runtime's Close returns
// once no update can follow, or says it gave up.
func waitGroup(ctx context.Context, wg *sync.WaitGroup, what string) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
}
