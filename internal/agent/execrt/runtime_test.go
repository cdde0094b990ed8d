//go:build unix

package execrt

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent/execrt/execrttest"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
)

// waitLimit only bounds a wait that would otherwise hang a broken test; no
// test sleeps to synchronise.
const waitLimit = 20 * time.Second

// recorder collects a runtime's updates and fails the test if one comes
// after Close returned.
type recorder struct {
	t      *testing.T
	mu     sync.Mutex
	all    []Update
	ch     chan struct{}
	closed atomic.Bool
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, ch: make(chan struct{}, 1)}
}

func (rec *recorder) update(u Update) {
	if rec.closed.Load() {
		rec.t.Errorf("update after Close: %+v", u)
	}
	rec.mu.Lock()
	rec.all = append(rec.all, u)
	rec.mu.Unlock()
	select {
	case rec.ch <- struct{}{}:
	default:
	}
}

// mark is where waitFor starts looking.
func (rec *recorder) mark() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.all)
}

// states lists module's states from update from on.
func (rec *recorder) states(from int, module string) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, u := range rec.all[from:] {
		if u.Module == module {
			out = append(out, u.State)
		}
	}
	return out
}

// applyRunning applies cs to r and waits for each of them to run.
func (rec *recorder) applyRunning(r *Runtime, cs ...mesh.Container) {
	rec.t.Helper()
	m := rec.mark()
	require.NoError(rec.t, r.Apply(context.Background(), cs, rec.update))
	for _, c := range cs {
		rec.waitFor(m, c.Module, mesh.StateRunning)
	}
}

// waitFor waits for module's first update to state from update from on.
func (rec *recorder) waitFor(from int, module, state string) Update {
	rec.t.Helper()
	return rec.waitMatch(from, module+" reaching "+state, func(u Update) bool { return u.Module == module && u.State == state })
}

// waitMatch waits for the first update from update from on that match
// accepts; what names it in the failure.
func (rec *recorder) waitMatch(from int, what string, match func(Update) bool) Update {
	rec.t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		rec.mu.Lock()
		for _, u := range rec.all[from:] {
			if match(u) {
				rec.mu.Unlock()
				return u
			}
		}
		seen := fmt.Sprint(rec.all[from:])
		rec.mu.Unlock()
		select {
		case <-rec.ch:
		case <-deadline.C:
			rec.t.Fatalf("never saw %s; updates: %s", what, seen)
		}
	}
}

type rtOpt func(*Options)

// twoWebBuilds pushes two builds of meshroll/web (the test app serving, as
// v1 and v2) to a registry of the test's own, and gives a fresh state dir
// for the runtime that pulls them: the set-up of the tests of a build
// replacing another.
func twoWebBuilds(t *testing.T) (reg *execrttest.Registry, v1, v2 execrttest.Pushed, dir string) {
	t.Helper()
	reg = execrttest.NewRegistry(t)
	v1 = reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	v2 = reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v2"))
	return reg, v1, v2, t.TempDir()
}

func newRuntime(t *testing.T, dir string, reg *execrttest.Registry, opts ...rtOpt) (*Runtime, *recorder) {
	t.Helper()
	o := Options{
		Machine:        "edge-1",
		StateDir:       dir,
		Registry:       reg.Options(),
		StopGrace:      5 * time.Second,
		HealthyAfter:   150 * time.Millisecond,
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     40 * time.Millisecond,
		ResetAfter:     time.Minute,
	}
	for _, f := range opts {
		f(&o)
	}
	r, err := New(o)
	require.NoError(t, err)
	rec := newRecorder(t)
	t.Cleanup(func() {
		require.NoError(t, r.Close(context.Background()))
		rec.closed.Store(true)
	})
	return r, rec
}

func (r *Runtime) pidOf(module string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ct := r.current[module]; ct != nil {
		return ct.pid
	}
	return 0
}

func (r *Runtime) containerOf(module string) *container {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current[module]
}

func ctr(module string, p execrttest.Pushed) mesh.Container {
	return mesh.Container{Module: module, Digest: p.Digest, Generation: 1, Image: p.Image}
}

func readLog(t *testing.T, dir, module string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "logs", module+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// eventually waits until cond holds; for what a child process writes, which
// no update announces.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	execrttest.Eventually(t, waitLimit, what, cond)
}

func logHas(t *testing.T, dir, module, s string) {
	t.Helper()
	eventually(t, fmt.Sprintf("log of %s has %q", module, s), func() bool { return strings.Contains(readLog(t, dir, module), s) })
}

func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

func waitDone(t *testing.T, ct *container) {
	t.Helper()
	select {
	case <-ct.done:
	case <-time.After(waitLimit):
		t.Fatalf("%s never stopped", ct.spec.Module)
	}
}

// sleeps are the backoff sleeps of a runtime, as they were asked for.
type sleeps struct {
	mu     sync.Mutex
	delays []time.Duration
	// slept is signalled (when it has room) after each sleep is recorded.
	slept chan struct{}
}

// recordSleeps makes r record each backoff sleep before it sleeps it.
func recordSleeps(r *Runtime) *sleeps {
	s := &sleeps{slept: make(chan struct{}, 100)}
	r.sleep = func(ctx context.Context, d time.Duration) error {
		s.mu.Lock()
		s.delays = append(s.delays, d)
		s.mu.Unlock()
		select {
		case s.slept <- struct{}{}:
		default:
		}
		return sleepCtx(ctx, d)
	}
	return s
}

// all is every sleep recorded so far.
func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.delays)
}

// The exec runtime runs processes on the machine's network: a container
// declared on a bridge is one it cannot run, said before anything starts.
func TestCheckRefusesABridge(t *testing.T) {
	r := &Runtime{}
	require.NoError(t, r.Check([]mesh.Container{{Module: "web"}, {Module: "api", Network: mesh.NetworkHost}}))
	err := r.Check([]mesh.Container{{Module: "web", Network: mesh.NetworkBridge}})
	require.ErrorContains(t, err, "module web: network bridge: the exec runtime runs processes on the machine's own network; declare network: host")
}

// Volumes, limits and a user are settings a process without a container
// cannot have: each is refused, naming module and field, before anything
// starts. A stop grace is honoured, so it passes.
func TestCheckRefusesWhatItCannotHonour(t *testing.T) {
	r := &Runtime{}
	require.NoError(t, r.Check([]mesh.Container{{Module: "web", Settings: mesh.Settings{StopGraceMS: 3000}}}))
	for _, tc := range []struct {
		field string
		s     mesh.Settings
	}{
		{"volumes", mesh.Settings{Volumes: []mesh.Mount{{Source: "data", Target: "/data"}}}},
		{"memory", mesh.Settings{MemoryBytes: 64 << 20}},
		{"cpus", mesh.Settings{NanoCPUs: 500_000_000}},
		{"user", mesh.Settings{User: "1000:1000"}},
	} {
		err := r.Check([]mesh.Container{{Module: "web"}, {Module: "api", Settings: tc.s}})
		require.ErrorContains(t, err, "module api: "+tc.field+": the exec runtime", tc.field)
		require.ErrorContains(t, err, "leave "+tc.field+" out", tc.field)
	}
	err := r.Check([]mesh.Container{{Module: "api", Network: mesh.NetworkBridge, Settings: mesh.Settings{User: "app", MemoryBytes: 64 << 20}}})
	require.ErrorContains(t, err, "module api: network bridge")
	require.ErrorContains(t, err, "module api: memory")
	require.ErrorContains(t, err, "module api: user")
}

func TestRunsImage(t *testing.T) {
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, []string{"IMAGE_ENV=from-image", "OVERRIDE=image"}, "serve", "v1"))
	dir := t.TempDir()
	t.Setenv("MESHROLL_HOST_REGISTRY_PASSWORD", "hunter2")
	r, rec := newRuntime(t, dir, reg)

	c := ctr("web", p)
	c.Env = map[string]string{"OVERRIDE": "declared", "DECLARED": "yes", "MESHROLL_MACHINE": "declared"}
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{c}, rec.update))
	assert.Equal(t, []string{mesh.StateStarting}, rec.states(0, "web"), "reported before Apply returned")
	rec.waitFor(0, "web", mesh.StateRunning)
	pid := r.pidOf("web")
	require.NotZero(t, pid)

	hex := strings.TrimPrefix(p.Digest, "sha256:")
	rootfs := filepath.Join(dir, "images", hex, "rootfs")
	logHas(t, dir, "web", "env MESHROLL_MODULE=web")
	log := readLog(t, dir, "web")
	assert.Contains(t, log, "testapp v1 mode serve pid "+strconv.Itoa(pid))
	assert.Contains(t, log, "cwd "+rootfs)
	assert.Contains(t, log, "env IMAGE_ENV=from-image")
	assert.Contains(t, log, "env OVERRIDE=declared", "declared env wins over the image's")
	assert.Contains(t, log, "env DECLARED=yes")
	assert.Contains(t, log, "env MESHROLL_MACHINE=edge-1", "the runtime's variables win over the declared ones")
	assert.Contains(t, log, "env MESHROLL_DIGEST="+p.Digest)
	assert.Contains(t, log, "env MESHROLL_DIGEST="+p.Digest)
	assert.NotContains(t, log, "hunter2", "the agent's environment is not passed on")
	assert.Contains(t, log, "meshroll exec: started pid "+strconv.Itoa(pid))

	for _, f := range []string{"complete", "config.json", "manifest.json"} {
		assert.FileExists(t, filepath.Join(dir, "images", hex, f))
	}
	fi, err := os.Stat(filepath.Join(rootfs, "app", "testapp"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())

	require.NoError(t, r.Close(context.Background()))
	rec.closed.Store(true)
	assert.True(t, gone(pid))
	assert.Contains(t, readLog(t, dir, "web"), "testapp v1 got SIGTERM")
	assert.Error(t, r.Apply(context.Background(), []mesh.Container{c}, rec.update), "closed")
}

func TestReplace(t *testing.T) {
	t.Parallel()
	reg, v1, v2, dir := twoWebBuilds(t)
	r, rec := newRuntime(t, dir, reg)

	rec.applyRunning(r, ctr("web", v1))
	pid1 := r.pidOf("web")

	// Unchanged: kept running, reported running at once.
	m := rec.mark()
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{ctr("web", v1)}, rec.update))
	assert.Equal(t, []string{mesh.StateRunning}, rec.states(m, "web"))
	assert.Equal(t, pid1, r.pidOf("web"))

	m = rec.mark()
	c2 := ctr("web", v2)
	c2.Generation = 2
	rec.applyRunning(r, c2)
	pid2 := r.pidOf("web")
	require.NotEqual(t, pid1, pid2)
	assert.True(t, gone(pid1), "old process is gone")
	assert.Equal(t, []string{mesh.StateStarting, mesh.StateRunning}, rec.states(m, "web"), "the replaced process is not reported")

	logHas(t, dir, "web", "testapp v2 mode serve")
	log := readLog(t, dir, "web")
	term := strings.Index(log, "testapp v1 got SIGTERM")
	exited := strings.Index(log, fmt.Sprintf("pid %d exited: stopped", pid1))
	started := strings.Index(log, fmt.Sprintf("started pid %d", pid2))
	require.True(t, term >= 0 && exited >= 0 && started >= 0, log)
	assert.Less(t, term, exited)
	assert.Less(t, exited, started, "the new process starts only after the old one is gone")

	// No longer declared: stopped.
	ct := r.containerOf("web")
	require.NoError(t, r.Apply(context.Background(), nil, rec.update))
	waitDone(t, ct)
	assert.True(t, gone(pid2))
	assert.Contains(t, readLog(t, dir, "web"), "testapp v2 got SIGTERM")
}

func TestCrashLoop(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/crash", execrttest.AppImage(t, nil, "exit", "3"))
	dir := t.TempDir()
	// A healthy-after time no start can outlast, so no run counts as up.
	r, rec := newRuntime(t, dir, reg, func(o *Options) { o.HealthyAfter = 5 * time.Second })
	sleeps := recordSleeps(r)

	require.NoError(t, r.Apply(context.Background(), []mesh.Container{ctr("crash", p)}, rec.update))
	u := rec.waitFor(0, "crash", mesh.StateCrashLooping)
	t.Log(u.Reason)
	logPath := filepath.Join(dir, "logs", "crash.log")
	assert.Contains(t, u.Reason, "exit code 3")
	assert.Contains(t, u.Reason, "3 short runs in a row")
	assert.Contains(t, u.Reason, "log "+logPath)
	assert.Equal(t, []string{
		mesh.StateStarting, mesh.StateExited, mesh.StateStarting, mesh.StateExited, mesh.StateStarting, mesh.StateCrashLooping,
	}, rec.states(0, "crash"))

	for len(sleeps.all()) < 5 {
		select {
		case <-sleeps.slept:
		case <-time.After(waitLimit):
			t.Fatal("no restarts")
		}
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{10 * ms, 20 * ms, 40 * ms, 40 * ms, 40 * ms}, sleeps.all()[:5], "backoff doubles up to its maximum")
	eventually(t, "five starts in the log", func() bool { return strings.Count(readLog(t, dir, "crash"), "meshroll exec: started pid") >= 5 })
	assert.Equal(t, mesh.StateCrashLooping, rec.states(0, "crash")[len(rec.states(0, "crash"))-1], "stays crash-looping while restarting")
}

func TestRestartAfterKill(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg, func(o *Options) { o.ResetAfter = time.Millisecond; o.BackoffInitial = 7 * time.Millisecond })
	sleeps := recordSleeps(r)
	rec.applyRunning(r, ctr("web", p))
	pid := r.pidOf("web")
	m := rec.mark()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	u := rec.waitFor(m, "web", mesh.StateExited)
	assert.Contains(t, u.Reason, "killed by signal 9")
	assert.Contains(t, u.Reason, "restarting in 7ms")
	rec.waitFor(m, "web", mesh.StateRunning)
	assert.NotEqual(t, pid, r.pidOf("web"))
	assert.Equal(t, []time.Duration{7 * time.Millisecond}, sleeps.all(), "a run that lasted resets the backoff")
}

func TestStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/stubborn", execrttest.AppImage(t, nil, "ignore-term", "v1"))
	dir := t.TempDir()
	grace := 300 * time.Millisecond
	r, rec := newRuntime(t, dir, reg, func(o *Options) { o.StopGrace = grace })
	rec.applyRunning(r, ctr("stubborn", p))
	pid := r.pidOf("stubborn")
	logHas(t, dir, "stubborn", "testapp v1 ignoring SIGTERM")

	start := time.Now()
	require.NoError(t, r.Close(context.Background()))
	rec.closed.Store(true)
	assert.GreaterOrEqual(t, time.Since(start), grace)
	assert.True(t, gone(pid))
	log := readLog(t, dir, "stubborn")
	assert.Contains(t, log, fmt.Sprintf("pid %d did not stop: SIGKILL", pid))
	assert.Contains(t, log, "killed by signal 9")
}

// A container's own stop grace is what its process gets between SIGTERM
// and SIGKILL, not the runtime's.
func TestStopKillsAfterTheContainersGrace(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/stubborn", execrttest.AppImage(t, nil, "ignore-term", "v1"))
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg, func(o *Options) { o.StopGrace = time.Hour })
	c := ctr("stubborn", p)
	c.StopGraceMS = 300
	rec.applyRunning(r, c)
	pid := r.pidOf("stubborn")
	logHas(t, dir, "stubborn", "testapp v1 ignoring SIGTERM")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, r.Close(ctx))
	rec.closed.Store(true)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 300*time.Millisecond, "the grace was given")
	assert.Less(t, took, 8*time.Second, "the container's grace, not the runtime's hour")
	assert.True(t, gone(pid))
	log := readLog(t, dir, "stubborn")
	assert.Contains(t, log, fmt.Sprintf("stopping pid %d: SIGTERM, SIGKILL after 300ms", pid))
	assert.Contains(t, log, fmt.Sprintf("pid %d did not stop: SIGKILL", pid))
}

func TestCloseOutOfTimeKills(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/stubborn", execrttest.AppImage(t, nil, "ignore-term", "v1"))
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg, func(o *Options) { o.StopGrace = time.Hour })
	rec.applyRunning(r, ctr("a", p), ctr("b", p))
	pids := []int{r.pidOf("a"), r.pidOf("b")}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.NoError(t, r.Close(ctx), "everything stopped, if without grace")
	rec.closed.Store(true)
	for _, pid := range pids {
		assert.True(t, gone(pid))
	}
}

func TestDigestMismatch(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	web := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	other := reg.Push(t, "meshroll/other", execrttest.AppImage(t, nil, "serve", "v2"))
	raw, err := execrttest.AppImage(t, nil, "serve", "v1").RawManifest()
	require.NoError(t, err)
	// Asked for other's digest in web's repository, the registry answers
	// with web's manifest.
	reg.Lie(other.Digest, raw)
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg)

	c := mesh.Container{Module: "web", Digest: other.Digest, Generation: 1, Image: web.Image}
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{c}, rec.update))
	u := rec.waitFor(0, "web", mesh.StateExited)
	t.Log(u.Reason)
	assert.Contains(t, u.Reason, other.Digest)
	assert.Contains(t, u.Reason, web.Digest)
	assert.Contains(t, u.Reason, "does not match its digest")
	assert.Contains(t, u.Reason, "not running it")
	waitDone(t, r.containerOf("web"))
	assert.Empty(t, readLog(t, dir, "web"), "never run")
	assert.NoDirExists(t, filepath.Join(dir, "images", strings.TrimPrefix(other.Digest, "sha256:")))
	assert.Equal(t, []string{mesh.StateStarting, mesh.StateExited}, rec.states(0, "web"))
}

func TestTamperedLayer(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	reg.Tamper(p.Layers[0])
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg)

	require.NoError(t, r.Apply(context.Background(), []mesh.Container{ctr("web", p)}, rec.update))
	u := rec.waitFor(0, "web", mesh.StateExited)
	t.Log(u.Reason)
	assert.Contains(t, u.Reason, "layer")
	assert.Contains(t, u.Reason, p.Layers[0])
	assert.Contains(t, u.Reason, "does not match its digest")
	waitDone(t, r.containerOf("web"))
	assert.Empty(t, readLog(t, dir, "web"), "never run")
	assert.NoDirExists(t, filepath.Join(dir, "images", strings.TrimPrefix(p.Digest, "sha256:")))
}

func TestCache(t *testing.T) {
	t.Parallel()
	reg, v1, v2, dir := twoWebBuilds(t)
	r, rec := newRuntime(t, dir, reg)

	rec.applyRunning(r, ctr("web", v1))
	n := reg.Requests()
	rec.applyRunning(r, ctr("web", v1), ctr("api", v1))
	assert.Equal(t, n, reg.Requests(), "a second container of a digest does not pull again")

	// A crash mid-unpack of v2 left a rootfs without the marker.
	junk := filepath.Join(dir, "images", strings.TrimPrefix(v2.Digest, "sha256:"), "rootfs", "junk")
	require.NoError(t, os.MkdirAll(filepath.Dir(junk), 0o700))
	require.NoError(t, os.WriteFile(junk, []byte("half"), 0o600))

	require.NoError(t, r.Close(context.Background()))
	r2, rec2 := newRuntime(t, dir, reg)
	rec2.applyRunning(r2, ctr("web", v1))
	assert.Equal(t, n, reg.Requests(), "a restarted runtime reuses the unpacked image")

	rec2.applyRunning(r2, ctr("web", v2))
	assert.Greater(t, reg.Requests(), n, "an unfinished unpack is pulled again")
	assert.NoFileExists(t, junk)
	assert.FileExists(t, filepath.Join(filepath.Dir(filepath.Dir(junk)), "complete"))
}

func TestBadImages(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	app := execrttest.Entry{Name: "app/testapp", Mode: 0o755, Body: execrttest.App(t)}
	cases := []struct {
		name  string
		img   execrttest.Config
		layer []execrttest.Entry
		want  []string
		is    error
	}{
		{"no entrypoint", execrttest.Config{}, []execrttest.Entry{app}, []string{"names no Entrypoint or Cmd"}, ErrBadImage},
		{"missing program", execrttest.Config{Entrypoint: []string{"/app/nope"}}, []execrttest.Entry{app}, []string{"/app/nope is not in the image"}, ErrBadImage},
		{"not executable", execrttest.Config{Entrypoint: []string{"/app/testapp"}}, []execrttest.Entry{{Name: "app/testapp", Mode: 0o644, Body: []byte("x")}}, []string{"not executable"}, ErrBadImage},
		{"entrypoint escapes by symlink", execrttest.Config{Entrypoint: []string{"/app/testapp"}},
			[]execrttest.Entry{{Name: "app/testapp", Type: tar.TypeSymlink, Linkname: "/bin/true"}}, []string{"unsafe", "path escapes"}, ErrUnsafeImage},
		{"layer escapes", execrttest.Config{Entrypoint: []string{"/app/testapp"}},
			[]execrttest.Entry{app, {Name: "../../escaped", Body: []byte("x")}}, []string{"leaves the image root"}, ErrUnsafeImage},
		{"layer writes through a symlink", execrttest.Config{Entrypoint: []string{"/app/testapp"}},
			[]execrttest.Entry{app, {Name: "out", Type: tar.TypeSymlink, Linkname: "../../.."}, {Name: "out/escaped", Body: []byte("x")}}, []string{"unsafe", "path escapes"}, ErrUnsafeImage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := reg.Push(t, "meshroll/bad", execrttest.Image(t, tc.img, execrttest.Layer(t, tc.layer...)))
			dir := filepath.Join(t.TempDir(), "state")
			r, rec := newRuntime(t, dir, reg)
			require.NoError(t, r.Apply(context.Background(), []mesh.Container{ctr("bad", p)}, rec.update))
			u := rec.waitFor(0, "bad", mesh.StateExited)
			for _, w := range tc.want {
				assert.Contains(t, u.Reason, w)
			}
			assert.Contains(t, u.Reason, "not running it")
			waitDone(t, r.containerOf("bad"))
			assert.NotContains(t, readLog(t, dir, "bad"), "started pid")
			assert.NoFileExists(t, filepath.Join(filepath.Dir(dir), "escaped"))
		})
	}
}

func TestRegistryUnreachableRetries(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg)
	var calls atomic.Int32
	release := make(chan struct{})
	r.sleep = func(ctx context.Context, d time.Duration) error {
		if calls.Add(1) == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return sleepCtx(ctx, d)
	}
	// The registry answering 503: the pull fails, the container stays
	// starting (nothing of it ran, so nothing exited), the failure is
	// told with its reason, and the pull is retried.
	reg.Down(true)
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{ctr("web", p)}, rec.update))
	u := rec.waitMatch(0, "a starting update telling the failed pull", func(u Update) bool {
		return u.Module == "web" && u.State == mesh.StateStarting && u.Reason != ""
	})
	assert.Contains(t, u.Reason, "retrying in 10ms")
	assert.NotContains(t, rec.states(0, "web"), mesh.StateExited, "a pull that will be retried is not an exit")
	reg.Down(false)
	close(release)
	rec.waitFor(0, "web", mesh.StateRunning)
}

// A pull the registry turns away (no such image: pushed elsewhere, or
// deleted) is not retried: the digest names the same bytes for ever, so no
// wait mends it, and the push fails at once rather than at its running
// timeout.
func TestImageNotInTheRegistryIsNotRetried(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg)
	c := ctr("web", p)
	c.Image = reg.Host() + "/meshroll/elsewhere"
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{c}, rec.update))
	u := rec.waitFor(0, "web", mesh.StateExited)
	assert.Contains(t, u.Reason, "the image is not in the registry")
	assert.Contains(t, u.Reason, "not running it")
	assert.NotContains(t, u.Reason, "retrying")
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	_, err := New(Options{})
	assert.ErrorContains(t, err, "no state directory")
	_, err = New(Options{StateDir: t.TempDir(), StopGrace: -time.Second})
	assert.ErrorContains(t, err, "stop grace -1s is negative")
	_, err = New(Options{StateDir: t.TempDir(), Registry: registryOptions("127.0.0.1:1", filepath.Join(t.TempDir(), "none.pem"))})
	assert.ErrorContains(t, err, "registry CA file")
	r, err := New(Options{StateDir: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, "exec", r.Name())
	assert.Equal(t, DefaultStopGrace, r.o.StopGrace)
	assert.Equal(t, DefaultHealthyAfter, r.o.HealthyAfter)
	require.NoError(t, r.Close(context.Background()))
}

func registryOptions(addr, caFile string) registry.Options {
	return registry.Options{Address: addr, CAFile: caFile}
}

func TestRelativeStateDir(t *testing.T) {
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	t.Chdir(t.TempDir())
	r, rec := newRuntime(t, filepath.Join("state", "host"), reg)
	rec.applyRunning(r, ctr("web", p))
	logHas(t, filepath.Join("state", "host"), "web", "testapp v1 mode serve")
}

// TestRestartsCounted: every exit the runtime answers by starting the
// process again is counted, in the exit's own update, also while the
// container stays crash-looping; a permanent exit counts nothing.
func TestRestartsCounted(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/crash", execrttest.AppImage(t, nil, "exit", "3"))
	r, rec := newRuntime(t, t.TempDir(), reg, func(o *Options) { o.HealthyAfter = 5 * time.Second })
	require.NoError(t, r.Apply(context.Background(), []mesh.Container{ctr("crash", p)}, rec.update))
	rec.waitMatch(0, "a fifth restart", func(u Update) bool { return u.Module == "crash" && u.Restarts == 5 })

	rec.mu.Lock()
	defer rec.mu.Unlock()
	var counts []int
	for _, u := range rec.all {
		if n := len(counts); n == 0 || counts[n-1] != u.Restarts {
			counts = append(counts, u.Restarts)
		}
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, counts[:6], "one more each exit, never fewer")
	for _, u := range rec.all {
		if u.State == mesh.StateCrashLooping && u.Restarts >= 4 {
			return
		}
	}
	t.Errorf("no restart counted while crash-looping: %v", rec.all)
}

// TestExec runs commands beside a container's process as it runs: in the
// image, with its environment, its exit code told, its output written, and
// killed whole when the context ends.
func TestExec(t *testing.T) {
	t.Parallel()
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	dir := t.TempDir()
	r, rec := newRuntime(t, dir, reg)
	ctx := context.Background()

	var out strings.Builder
	_, err := r.Exec(ctx, "web", []string{execrttest.AppPath, "probe", "v1", "0"}, &out)
	assert.ErrorContains(t, err, "container web has no process", "nothing declared yet")

	c := ctr("web", p)
	c.Env = map[string]string{"MESHROLL_PORT": "1234"}
	require.NoError(t, r.Apply(ctx, []mesh.Container{c}, rec.update))
	rec.waitFor(0, "web", mesh.StateRunning)

	cases := []struct {
		name   string
		argv   []string
		code   int
		output string
		err    string
	}{
		{"passes", []string{execrttest.AppPath, "probe", "v1", "0"}, 0, "probe v1 module web exits 0\n", ""},
		{"fails", []string{execrttest.AppPath, "probe", "v1", "3"}, 3, "probe v1 module web exits 3\n", ""},
		{"relative to the working directory", []string{"app/testapp", "probe", "v1", "1"}, 1, "probe v1 module web exits 1\n", ""},
		{"not in the image", []string{"/bin/nope"}, 0, "", "/bin/nope is not in the image"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			code, err := r.Exec(ctx, "web", tc.argv, &out)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.output, out.String())
		})
	}

	t.Run("environment", func(t *testing.T) {
		var out strings.Builder
		_, err := r.Exec(ctx, "web", []string{execrttest.AppPath, "exit", "0"}, &out)
		require.NoError(t, err)
		assert.Contains(t, out.String(), "env MESHROLL_PORT=1234")
		assert.Contains(t, out.String(), "env MESHROLL_MODULE=web")
		assert.Contains(t, out.String(), "env MESHROLL_MACHINE=edge-1")
		assert.Contains(t, out.String(), "cwd "+filepath.Join(dir, "images", strings.TrimPrefix(p.Digest, "sha256:"), "rootfs"))
	})
	t.Run("outlives its context", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		var out strings.Builder
		_, err := r.Exec(tctx, "web", []string{execrttest.AppPath, "ignore-term", "stuck"}, &out)
		assert.ErrorContains(t, err, "did not finish in time")
		var pid int
		_, serr := fmt.Sscanf(out.String(), "testapp stuck mode ignore-term pid %d", &pid)
		require.NoError(t, serr, out.String())
		assert.True(t, gone(pid), "killed")
	})
}
