// Package execrt is meshroll's exec runtime: it pulls each declared
// container's image by digest from an OCI registry, checks the image against
// that digest, unpacks it into the agent's state directory and supervises the
// image's entrypoint as a child process of the host agent. It exists so that
// a machine needs nothing but the host agent to run exactly the build a
// declaration pins: no Docker, no containerd.
//
// # What it is not
//
// It is not a container: there are no namespaces, no chroot, no cgroups and
// no user switch. The entrypoint runs as the agent's user, with the image's
// root filesystem as its working directory and the image's files reached by
// path inside it. That suits the statically linked binaries meshroll's
// builder makes (a Go binary at /app/<module>); a dynamically linked one
// finds the machine's loader and libraries, not the image's. The rootfs is
// shared by every container and restart of one digest and is writable by
// the process, so a process that writes into its image changes it for the
// next start.
//
// What it does guard is the agent: an image is never run unless its
// manifest, config and every layer match the declared digest, and unpacking
// never writes outside the image's root (see unpack.go).
//
// # On disk
//
// Under the state directory (the agent's, next to its journal):
//
//	images/<hex>/manifest.json  the manifest as pulled (<hex>: the declared
//	                            digest without "sha256:")
//	images/<hex>/config.json    the image config as pulled
//	images/<hex>/rootfs/        the layers, applied in order
//	images/<hex>/complete       written last; a directory without it is a
//	                            crashed or failed unpack and is redone
//	logs/<module>.log           the container's stdout and stderr, appended
//	                            across restarts (never rotated), with a
//	                            "meshroll exec:" line at every start and exit
//
// Images are cached by digest and never removed: a second container of the
// same digest, a restart and a restarted agent reuse the unpacked rootfs
// without asking the registry.
//
// # States
//
// A declared container reports starting while its image is pulled and
// unpacked and its process starts, and running once the process has stayed
// up for HealthyAfter (one that exits sooner did not start). A process that
// exits, with any code, is restarted after an exponential backoff
// (BackoffInitial doubling up to BackoffMax, reset once a run lasted
// ResetAfter); the container reports exited with the exit code or signal,
// the backoff and the log file, and after CrashLoopAfter exits in a row that
// each ran shorter than ResetAfter it reports crash-looping and stays so,
// restarting with backoff, until a process runs again. An image that does
// not match its digest, is unsafe to unpack or names nothing to run leaves
// the container exited for good, and so does a pull the registry turns away
// (it wants other credentials, refuses them, or has no such image:
// registry.PullRetryable). A pull that fails for any other reason (a
// registry that cannot be reached, or answers 5xx) is tried again with
// backoff, and the container keeps reporting starting meanwhile, each failed
// attempt sent as a starting update with the error and the backoff as its
// reason: no process of the image has run, so nothing exited, and a
// registry that is down for a moment must not read as a broken build to
// whoever waits for the container to run (the push waits until its running
// timeout).
//
// Every exit the runtime answers by starting the process again is a
// restart, counted from the container's hand-over and told with the exit
// (Update.Restarts), also while the container stays crash-looping: a
// restart breaks a container's health, however quickly it comes back.
//
// # Commands beside a process
//
// Exec runs a command as the container's process runs (found in the image,
// in its working directory, with its environment, MESHROLL_PORT included)
// and waits for it: what the agent's exec health probes need. Like the
// process it has a process group of its own, killed whole when it ends or
// its context does.
package execrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
)

// Name is the runtime's name as the agent reports and journals it.
const Name = "exec"

// Defaults of Options, chosen for long-running services: a second is long
// enough for a broken binary to fail, ten seconds is what Docker gives a
// process to stop, and the backoff keeps a crashing container from burning a
// core while still retrying within half a minute.
const (
	DefaultStopGrace      = 10 * time.Second
	DefaultHealthyAfter   = time.Second
	DefaultBackoffInitial = 500 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
	DefaultResetAfter     = 10 * time.Second
	DefaultCrashLoopAfter = 3
)

// Errors that make a container exited for good: retrying cannot help, since
// the declared digest names the same bytes forever.
var (
	// ErrDigestMismatch means the registry served a manifest, config or
	// layer whose digest is not the one asked for. The image is not run.
	ErrDigestMismatch = errors.New("content does not match its digest")
	// ErrUnsafeImage means a layer tried to write outside the image's root
	// (a "..", a path through a symlink leading out, a whiteout of the
	// parent) or the entrypoint resolves outside it. The image is not run.
	ErrUnsafeImage = errors.New("image is unsafe to unpack or run")
	// ErrBadImage means the image cannot be unpacked (a layer that is not a
	// tar, an entry that cannot be made) or names nothing to run (no
	// Entrypoint or Cmd, or a program that is not in the image).
	ErrBadImage = errors.New("image cannot be unpacked or run")
)

// permanent reports whether err leaves the container exited for good.
func permanent(err error) bool {
	return errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrUnsafeImage) || errors.Is(err, ErrBadImage) ||
		!registry.PullRetryable(err)
}

// Update is one container's state as its runtime sees it. The agent's
// Update is this type, defined here so that this package does not import
// the agent that imports it; every runtime reports with it.
type Update struct {
	Module string
	// State is one of mesh.StateStarting, StateRunning, StateExited or
	// StateCrashLooping.
	State string
	// Since is when the container entered State.
	Since time.Time
	// Reason says why a container exited or crash-loops; it is journalled.
	// On a starting update it says why the container has not started yet
	// (a pull the runtime retries); that is logged.
	Reason string
	// Restarts counts how often the runtime restarted the container since
	// it was handed over: every exit it answers by starting it again
	// (counted when the exit is reported, with the restart ahead). It is
	// reported, and breaks the container's health like the exit does.
	Restarts int
}

// Options configures New. Zero durations take the defaults above.
type Options struct {
	// Machine is the machine the runtime runs containers for, passed to
	// them as mesh.EnvMachine.
	Machine string
	// StateDir holds the image cache and the logs (see the package
	// comment); the agent passes its own state directory. Required; a
	// relative one is made absolute at New.
	StateDir string
	// Registry authenticates pulls from the registry it names. Its
	// credentials are only ever sent to that registry: an image in another
	// registry is pulled anonymously. With no Address every pull is
	// anonymous (Registry.CAFile is still trusted).
	Registry registry.Options
	// StopGrace is how long a stopped process has between SIGTERM and
	// SIGKILL.
	StopGrace time.Duration
	// HealthyAfter is how long a process must stay up to count as running.
	HealthyAfter time.Duration
	// BackoffInitial and BackoffMax bound the delay before a restart; it
	// doubles with every exit in a row.
	BackoffInitial, BackoffMax time.Duration
	// ResetAfter is how long a run must last for its exit to start the
	// backoff and the crash-loop count afresh.
	ResetAfter time.Duration
	// CrashLoopAfter is how many short runs in a row make a container
	// crash-looping.
	CrashLoopAfter int
}

// Runtime runs declared containers as supervised child processes of images
// pulled by digest. It implements the agent's Runtime contract: Apply
// reports every container before it returns and never waits for one to
// start; an unchanged container keeps running; a replaced one is stopped
// (SIGTERM, then SIGKILL after the grace) before its successor's process
// starts, but only once the successor's image is ready, so a roll-out's
// downtime is a process restart, not a pull; Close stops everything and
// returns once no update can follow. Safe for concurrent use.
type Runtime struct {
	o        Options
	images   string
	logs     string
	regHost  string          // the configured registry's name, "" for none
	regOpts  []remote.Option // with its credentials
	anonOpts []remote.Option // for any other registry
	idle     []func()

	// sleep waits d or until ctx ends; tests replace it to see the backoff.
	sleep func(ctx context.Context, d time.Duration) error

	mu         sync.Mutex
	closed     bool
	current    map[string]*container // declared, by module
	last       map[string]*container // newest instance per module, maybe stopping
	live       map[*container]struct{}
	imageLocks map[string]chan struct{}
	wg         sync.WaitGroup
	killNow    chan struct{} // closed when Close runs out of time
	killOnce   sync.Once
}

// container is one declared instance of a module. Its supervisor goroutine
// owns the process; the fields under "mu" are the runtime's.
type container struct {
	spec   mesh.Container
	ctx    context.Context // cancelled: stop
	cancel context.CancelFunc
	// prev is the instance this one replaces; it is stopped before this
	// one's process starts. Only the supervisor touches it after start.
	prev *container
	done chan struct{} // closed when the process is gone and prev too

	// Under Runtime.mu.
	update func(Update) // nil once superseded, removed or closed
	state  string
	since  time.Time
	reason string
	pid    int
	img    *image // once pulled and unpacked
	// restarts counts restarts; told is the count last passed to update.
	restarts, told int
}

// New returns an exec runtime keeping its images and logs under
// o.StateDir. It fails if the directory cannot be made or the registry
// options are unusable (a bad address or CA file), so that the agent refuses
// to start rather than fail every pull.
func New(o Options) (*Runtime, error) {
	if unsupported != "" {
		return nil, errors.New(unsupported)
	}
	if o.StateDir == "" {
		return nil, errors.New("runtime exec: no state directory")
	}
	// Absolute, because a process's program path is resolved against its
	// working directory, which is inside the rootfs.
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("runtime exec: state directory: %w", err)
	}
	o.StateDir = abs
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"stop grace", &o.StopGrace, DefaultStopGrace},
		{"healthy-after time", &o.HealthyAfter, DefaultHealthyAfter},
		{"initial backoff", &o.BackoffInitial, DefaultBackoffInitial},
		{"maximum backoff", &o.BackoffMax, DefaultBackoffMax},
		{"backoff reset time", &o.ResetAfter, DefaultResetAfter},
	} {
		if *d.v < 0 {
			return nil, fmt.Errorf("runtime exec: %s %s is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.BackoffMax < o.BackoffInitial {
		o.BackoffMax = o.BackoffInitial
	}
	if o.CrashLoopAfter <= 0 {
		o.CrashLoopAfter = DefaultCrashLoopAfter
	}
	r := &Runtime{
		o:          o,
		images:     filepath.Join(o.StateDir, "images"),
		logs:       filepath.Join(o.StateDir, "logs"),
		sleep:      sleepCtx,
		current:    map[string]*container{},
		last:       map[string]*container{},
		live:       map[*container]struct{}{},
		imageLocks: map[string]chan struct{}{},
		killNow:    make(chan struct{}),
	}
	for _, d := range []string{r.images, r.logs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("runtime exec: %w", err)
		}
	}
	if o.Registry.Address != "" {
		reg, err := o.Registry.Registry()
		if err != nil {
			return nil, fmt.Errorf("runtime exec: %w", err)
		}
		opts, done, err := o.Registry.Session()
		if err != nil {
			return nil, fmt.Errorf("runtime exec: %w", err)
		}
		r.regHost, r.regOpts = reg.RegistryStr(), opts
		r.idle = append(r.idle, done)
	}
	t, err := o.Registry.Transport()
	if err != nil {
		return nil, fmt.Errorf("runtime exec: %w", err)
	}
	r.anonOpts = []remote.Option{remote.WithAuth(authn.Anonymous), remote.WithTransport(t), remote.WithUserAgent("meshroll")}
	if ht, ok := t.(interface{ CloseIdleConnections() }); ok {
		r.idle = append(r.idle, ht.CloseIdleConnections)
	}
	return r, nil
}

// Name is "exec".
func (r *Runtime) Name() string { return Name }

// Apply makes the runtime run exactly cs. An unchanged container (declared
// JSON-identically) is kept and its current state reported; a new or
// changed one reports starting and is pulled, unpacked and started in the
// background; one no longer declared is stopped in the background. Updates
// for cs go to update from now on, including those of kept containers.
func (r *Runtime) Apply(_ context.Context, cs []mesh.Container, update func(Update)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("runtime exec: closed")
	}
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		// The name becomes a file name (the log); the agent has checked
		// it already, but this package writes the file.
		if err := mesh.ValidName("module", c.Module); err != nil {
			return fmt.Errorf("runtime exec: %w", err)
		}
		if seen[c.Module] {
			return fmt.Errorf("runtime exec: module %s is declared twice", c.Module)
		}
		seen[c.Module] = true
	}
	next := make(map[string]*container, len(cs))
	for _, c := range cs {
		if old, ok := r.current[c.Module]; ok && mesh.SameSpec(old.spec, c) {
			old.update = update
			old.told = old.restarts
			next[c.Module] = old
			update(Update{Module: c.Module, State: old.state, Since: old.since, Reason: old.reason, Restarts: old.restarts})
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		ct := &container{
			spec: host.CloneContainer(c), ctx: ctx, cancel: cancel, done: make(chan struct{}),
			update: update, state: mesh.StateStarting, since: time.Now().UTC(),
		}
		if prev := r.last[c.Module]; prev != nil {
			select {
			case <-prev.done:
			default:
				// It keeps running, unreported, until ct is ready.
				prev.update = nil
				ct.prev = prev
			}
		}
		r.last[c.Module] = ct
		r.live[ct] = struct{}{}
		next[c.Module] = ct
		update(Update{Module: c.Module, State: ct.state, Since: ct.since})
		r.wg.Add(1)
		go r.supervise(ct)
	}
	for m, old := range r.current {
		if _, ok := next[m]; !ok {
			old.update = nil
			old.cancel()
		}
	}
	for m, ct := range r.last {
		if _, ok := next[m]; !ok {
			select {
			case <-ct.done:
				delete(r.last, m)
			default:
			}
		}
	}
	r.current = next
	return nil
}

// Close stops every process (SIGTERM, SIGKILL after the grace, or at once
// when ctx ends first) and returns once they are gone; no update is made
// after Close begins.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	for ct := range r.live {
		ct.update = nil
		ct.cancel()
	}
	r.current = map[string]*container{}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	defer func() {
		for _, f := range r.idle {
			f()
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	// Out of time for grace: kill what is left and wait for it to be gone.
	r.killOnce.Do(func() { close(r.killNow) })
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("runtime exec: close: processes still running after SIGKILL: %w", ctx.Err())
	}
}

// report records ct's new state and passes it on unless ct is silenced.
// Updates are made with r.mu held so that, for any one container, they
// arrive in the order they happened and none follows Close. restarted
// counts a restart ahead (the process exited and will be started again).
func (r *Runtime) report(ct *container, state, reason string, restarted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if restarted {
		ct.restarts++
	}
	if ct.state == state && ct.reason == reason && ct.restarts == ct.told {
		return
	}
	changed := ct.state != state
	ct.state, ct.reason = state, reason
	if changed {
		ct.since = time.Now().UTC()
	}
	// A failed pull that will be retried stays starting; each failure is
	// still told, with its reason, so that the agent can log it. So is a
	// restart of a crash-looping process, which stays crash-looping.
	retrying := state == mesh.StateStarting && reason != ""
	if ct.update != nil && ct.ctx.Err() == nil && (changed || retrying || ct.restarts != ct.told) {
		ct.told = ct.restarts
		ct.update(Update{Module: ct.spec.Module, State: state, Since: ct.since, Reason: reason, Restarts: ct.restarts})
	}
}

// superseded reports whether ct was replaced by a newer instance but not
// told to stop yet.
func (r *Runtime) superseded(ct *container) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ct.update == nil && ct.ctx.Err() == nil
}

func (r *Runtime) setPID(ct *container, pid int) {
	r.mu.Lock()
	ct.pid = pid
	r.mu.Unlock()
}
