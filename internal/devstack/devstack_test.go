package devstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devlaunch/devlaunchtest"
	"github.com/meshroll/meshroll/internal/syncbuf"
	"github.com/meshroll/meshroll/internal/temporalcli"
	"github.com/meshroll/meshroll/internal/webhook"
)

// ports of a test mesh, each free when picked.
type ports struct{ temporal, ui, registry, edge, control, metrics, fleet, hook int }

func freePort(t *testing.T) int {
	t.Helper()
	return freePortsN(t, 1)[0]
}

// freePortsN picks n distinct free ports, holding each until all are picked
// so that the kernel cannot hand the same one out twice.
func freePortsN(t *testing.T, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer func() { _ = l.Close() }()
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out
}

func freePorts(t *testing.T) ports {
	p := freePortsN(t, 8)
	return ports{p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]}
}

// writeMesh writes a two-tier mesh on p's ports and returns its path,
// beside a repository holding its modules' directories.
func writeMesh(t *testing.T, p ports) string {
	t.Helper()
	dir := t.TempDir()
	for _, m := range []string{"controller", "host"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "examples", m), 0o755))
	}
	out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput()
	require.NoError(t, err, "git init: %s", out)
	y := fmt.Sprintf(`temporal: {address: "127.0.0.1:%d", namespace: default, task_queue: devstack-test}
registry: {listen: "127.0.0.1:%d"}
worker: {ui_listen: "127.0.0.1:%d", webhook_listen: "127.0.0.1:%d", webhook_secret_file: %q}
modules:
  ctl:  {repo: ., path: examples/controller, control_plane: true}
  host: {repo: ., path: examples/host}
machines:
  edge-1:       {host: "http://127.0.0.1:%d", tier: 1, modules: [host]}
  control-node: {host: "http://127.0.0.1:%d", tier: 2, modules: [ctl, host]}
`, p.temporal, p.registry, p.fleet, p.hook, filepath.Join(dir, "hook-secret"), p.edge, p.control)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hook-secret"), []byte("hook-s3cret\n"), 0o600))
	path := filepath.Join(dir, "mesh.yaml")
	require.NoError(t, os.WriteFile(path, []byte(y), 0o644))
	return path
}

func load(t *testing.T, y string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("mesh.yaml", []byte(y))
	require.NoError(t, err)
	return cfg
}

const exampleYAML = `temporal: {address: 127.0.0.1:7233}
modules:
  ctl:  {repo: ., path: c, control_plane: true}
  host: {repo: ., path: h}
machines:
  edge-2:       {host: "http://127.0.0.1:7402", tier: 1, modules: [host]}
  control-node: {host: "http://127.0.0.1:7400", tier: 2, modules: [ctl, host]}
  edge-1:       {host: "http://127.0.0.1:7401", tier: 1, modules: [host]}
`

// Every address the stack binds is listed, with the setting that names it,
// machines in push order.
func TestBindsNameEverySetting(t *testing.T) {
	bs, err := binds(load(t, exampleYAML), 8233, "mesh.yaml")
	require.NoError(t, err)
	var got []string
	for _, b := range bs {
		got = append(got, b.addr+" "+b.key)
	}
	assert.Equal(t, []string{
		"127.0.0.1:7233 temporal.address",
		"127.0.0.1:8233 --ui-port",
		"127.0.0.1:5000 registry.listen",
		"127.0.0.1:7401 machines.edge-1.host",
		"127.0.0.1:7402 machines.edge-2.host",
		"127.0.0.1:7400 machines.control-node.host",
	}, got)
	assert.Equal(t, "change temporal.address in mesh.yaml", bs[0].fix)
}

// The dev stack serves the fleet page on loopback unless the config moves
// it, its plans linked to the stack's own Web UI, and checks its port with
// the others.
func TestDevDefaultsServeTheFleetPage(t *testing.T) {
	cfg := load(t, exampleYAML)
	devDefaults(cfg, 8233)
	assert.Equal(t, DefaultFleetListen, cfg.Worker.UIListen)
	assert.Equal(t, "http://127.0.0.1:8233", cfg.Temporal.UIURL)
	require.NoError(t, cfg.Validate(), "loopback needs no token")
	bs, err := binds(cfg, 8233, "mesh.yaml")
	require.NoError(t, err)
	assert.Contains(t, bs, bind{addr: "127.0.0.1:8234", key: "worker.ui_listen", fix: "change worker.ui_listen in mesh.yaml"})

	assert.Equal(t, DefaultWebhookListen, cfg.Worker.WebhookListen)
	assert.Equal(t, filepath.Join(cfg.StateDir, WebhookSecretName), cfg.Worker.WebhookSecretFile, "a secret of the stack's own")
	assert.Contains(t, bs, bind{addr: "127.0.0.1:8235", key: "worker.webhook_listen", fix: "change worker.webhook_listen in mesh.yaml"})

	// The stack's own secret is made once and kept across restarts.
	secret := filepath.Join(t.TempDir(), WebhookSecretName)
	require.NoError(t, ensureSecret(secret))
	first, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.NoError(t, ensureSecret(secret))
	again, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Len(t, bytes.TrimSpace(first), 48)
	assert.Equal(t, first, again)

	assert.Empty(t, cfg.Worker.EnrollListen, "no enrollment without enroll.modules")
	enrolling := load(t, exampleYAML+"enroll: {modules: [host]}\n")
	devDefaults(enrolling, 8233)
	assert.Equal(t, DefaultEnrollListen, enrolling.Worker.EnrollListen)
	assert.Equal(t, filepath.Join(enrolling.StateDir, EnrollTokenName), enrolling.Worker.EnrollTokenFile, "a token of the stack's own")
	require.NoError(t, enrolling.Validate())
	bs, err = binds(enrolling, 8233, "mesh.yaml")
	require.NoError(t, err)
	assert.Contains(t, bs, bind{addr: "127.0.0.1:8236", key: "worker.enroll_listen", fix: "change worker.enroll_listen in mesh.yaml"})

	own := load(t, "worker: {ui_listen: \"127.0.0.1:9234\"}\ntemporal: {address: 127.0.0.1:7233, ui_url: \"https://temporal.example.com\"}\n"+strings.SplitN(exampleYAML, "\n", 2)[1])
	devDefaults(own, 8233)
	assert.Equal(t, "127.0.0.1:9234", own.Worker.UIListen, "the config's address wins")
	assert.Equal(t, "https://temporal.example.com", own.Temporal.UIURL)
}

// An external registry is not started, so its listen address is not bound.
func TestBindsSkipExternalRegistry(t *testing.T) {
	bs, err := binds(load(t, exampleYAML+"registry: {address: \"127.0.0.1:6000\"}\n"), 8233, "mesh.yaml")
	require.NoError(t, err)
	for _, b := range bs {
		assert.NotEqual(t, "registry.listen", b.key)
	}
}

// What the stack cannot serve is refused before anything starts, in one
// line naming the key.
func TestBindsRefuse(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"https host": {
			strings.Replace(exampleYAML, `"http://127.0.0.1:7401"`, `"https://127.0.0.1:7401"`, 1),
			"machines.edge-1.host: \"https://127.0.0.1:7401\": the dev stack serves host agents over plain http",
		},
		"shared port": {
			strings.Replace(exampleYAML, `"http://127.0.0.1:7401"`, `"http://127.0.0.1:7400"`, 1),
			"both want 127.0.0.1:7400",
		},
		"metrics on the registry's port": {
			"worker: {metrics_listen: \"127.0.0.1:5000\"}\n" + exampleYAML,
			"registry.listen and worker.metrics_listen both want 127.0.0.1:5000",
		},
		"temporal port 0": {
			strings.Replace(exampleYAML, "127.0.0.1:7233", `"127.0.0.1:0"`, 1),
			"needs a fixed port",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := binds(load(t, tc.yaml), 8233, "mesh.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	_, err := binds(load(t, exampleYAML), 8233, "mesh.yaml")
	require.NoError(t, err)
	_, err = binds(load(t, exampleYAML), 70000, "mesh.yaml")
	require.ErrorContains(t, err, "--ui-port 70000")
}

// A port in use is one line naming the port, the setting and the fix, and
// the other ports in use after it.
func TestCheckPortsInUse(t *testing.T) {
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l1.Close() }()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l2.Close() }()
	free := fmt.Sprintf("127.0.0.1:%d", freePort(t))

	require.NoError(t, checkPorts([]bind{{addr: free, key: "x"}}))
	err = checkPorts([]bind{
		{addr: free, key: "registry.listen", fix: "f0"},
		{addr: l1.Addr().String(), key: "temporal.address", fix: "change temporal.address in mesh.yaml"},
		{addr: l2.Addr().String(), key: "machines.a.host", fix: "f2"},
	})
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("port %s (temporal.address) is in use: stop what holds it (another dev stack?) or change temporal.address in mesh.yaml; also in use: %s (machines.a.host)",
		l1.Addr(), l2.Addr()), err.Error())
	// The free one was released again.
	l, err := net.Listen("tcp", free)
	require.NoError(t, err)
	_ = l.Close()
}

// An environment variable that overrides the key is what the fix names.
func TestChangeNamesOverridingVariable(t *testing.T) {
	t.Setenv("MESHROLL_MACHINES_EDGE_1_HOST", "http://127.0.0.1:9")
	assert.Equal(t, "change MESHROLL_MACHINES_EDGE_1_HOST (it overrides machines.edge-1.host in m.yaml)",
		change("machines.edge-1.host", "m.yaml", "machines", "edge-1", "host"))
	assert.Equal(t, "change temporal.address in m.yaml", change("temporal.address", "m.yaml", "temporal", "address"))
}

func TestDevServerArgs(t *testing.T) {
	cfg := func(ns, fleet string) *config.Config {
		return &config.Config{Temporal: config.Temporal{Address: "127.0.0.1:7233", Namespace: ns}, Worker: config.Worker{UIListen: fleet}}
	}
	line := strings.Join(devServerArgs(cfg("default", "0.0.0.0:8234"), 8233, "/s/temporal.db"), " ")
	assert.True(t, strings.HasPrefix(line, "--ui-port 8233 --db-filename /s/temporal.db --log-level warn"), line)
	assert.NotContains(t, line, "--namespace", "the default namespace always exists")
	assert.Contains(t, line, "--ui-codec-endpoint http://127.0.0.1:8234/codec", "the Web UI decodes payloads at the fleet page's server")
	assert.NotContains(t, strings.Join(devServerArgs(cfg("default", ""), 8233, "db"), " "), "--ui-codec-endpoint", "no fleet page, no codec endpoint")
	assert.Contains(t, line, "--search-attribute MeshrollMachines=KeywordList")
	assert.Contains(t, line, "--search-attribute MeshrollModule=Keyword")
	assert.Contains(t, line, "matching.numTaskqueueReadPartitions=1")

	assert.Contains(t, strings.Join(devServerArgs(cfg("mesh", ""), 8233, "db"), " "), "--namespace mesh")
}

func TestTailFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(p, []byte("old run\nline 1\nline 2\nline 3\n"), 0o644))
	assert.Equal(t, "  line 2\n  line 3", tailFile(p, 0, 2))
	assert.Equal(t, "  line 1\n  line 2\n  line 3", tailFile(p, int64(len("old run\n")), 10), "only this run's lines")
	assert.Equal(t, "  (nothing)", tailFile(p, 32, 10))
	require.NoError(t, os.WriteFile(p, []byte("--- meshroll dev stack 2026-01-02T03:04:05Z\n--- devserver 03:04:05.000: starting temporal server start-dev on 127.0.0.1:7233 (--ui-port 8233)\nbind failed\n"), 0o644))
	assert.Equal(t, "  bind failed", tailFile(p, 0, 10), "our own lines are not the server's")
	require.NoError(t, os.WriteFile(p, []byte("--- devserver 03:04:05.000: starting temporal\n"), 0o644))
	assert.Equal(t, "  (nothing)", tailFile(p, 0, 10))
}

func TestDisplayAndDialable(t *testing.T) {
	cwd, err := os.Getwd()
	require.NoError(t, err)
	s := &stack{cwd: cwd}
	assert.Equal(t, filepath.Join(".meshroll", "logs"), s.display(filepath.Join(cwd, ".meshroll", "logs")))
	assert.Equal(t, ".meshroll", s.display(".meshroll"))
	other := filepath.Join(filepath.Dir(cwd), "elsewhere")
	assert.Equal(t, other, s.display(other))
	assert.Equal(t, "127.0.0.1:8233", dialable("0.0.0.0:8233"))
	assert.Equal(t, "127.0.0.1:5000", dialable(":5000"))
	assert.Equal(t, "localhost:5000", dialable("localhost:5000"))
}

// A port in use stops Run before it starts anything or creates state.
func TestRunPortInUse(t *testing.T) {
	p := freePorts(t)
	path := writeMesh(t, p)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.edge))
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	state := filepath.Join(t.TempDir(), "state")
	var out bytes.Buffer
	err = Run(context.Background(), Options{ConfigPath: path, StateDir: state, UIPort: p.ui, Out: &out})
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("port 127.0.0.1:%d (machines.edge-1.host) is in use: stop what holds it (another dev stack?) or change machines.edge-1.host in %s", p.edge, path), err.Error())
	assert.Empty(t, out.String())
	assert.NoDirExists(t, state)
}

// fakeCLI points MESHROLL_TEMPORAL_CLI at a shell script standing in for
// the Temporal CLI, which says it is the pinned version and otherwise runs
// script; it returns the script's path.
func fakeCLI(t *testing.T, script string) string {
	t.Helper()
	p := fakeTemporal(t, t.TempDir(), strings.TrimPrefix(temporalcli.Version, "v"), script)
	t.Setenv(temporalcli.Env, p)
	return p
}

// fakeTemporal writes dir/temporal, a shell script that answers --version
// as a release build of version does and otherwise runs script.
func fakeTemporal(t *testing.T, dir, version, script string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs a shell script as the fake CLI")
	}
	p := filepath.Join(dir, "temporal")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+
		`if [ "$1" = --version ]; then echo "temporal version `+version+` (Server 1.29.1, UI 2.42.1)"; exit 0; fi`+"\n"+
		script+"\n"), 0o755))
	return p
}

// failedRun is a run of the stack that failed before it was ready.
type failedRun struct {
	p     ports
	path  string // the mesh config
	state string
	out   string // the stack's account
	err   error
}

// runToFailure runs the stack on a mesh of free ports with a state
// directory of its own, and requires that the run fails.
func runToFailure(t *testing.T) failedRun {
	t.Helper()
	r := failedRun{p: freePorts(t), state: t.TempDir()}
	r.path = writeMesh(t, r.p)
	var out bytes.Buffer
	r.err = Run(context.Background(), Options{ConfigPath: r.path, StateDir: r.state, UIPort: r.p.ui, Out: &out})
	r.out = out.String()
	require.Error(t, r.err)
	return r
}

// A dev server that dies at start is an error naming its log, with its last
// lines; everything is stopped and the ports are free again.
func TestRunDevServerExits(t *testing.T) {
	cli := fakeCLI(t, `echo "fake server: cannot open database" >&2; exit 3`)
	r := runToFailure(t)
	p, path, state, out, err := r.p, r.path, r.state, r.out, r.err
	assert.Contains(t, out, "temporal   "+cli+"  (Temporal CLI "+temporalcli.Version+", found $"+temporalcli.Env+")\n",
		"the account says which binary it runs")
	assert.Contains(t, err.Error(), "the Temporal dev server exited before answering (exit status 3)")
	assert.Contains(t, err.Error(), filepath.Join(state, "logs", "temporal.log"))
	assert.Contains(t, err.Error(), "fake server: cannot open database")
	assert.NotContains(t, out, "ready")
	require.NoError(t, checkPorts([]bind{{addr: fmt.Sprintf("127.0.0.1:%d", p.temporal)}}))
	// The lock is released: a second run gets as far as the server again.
	err = Run(context.Background(), Options{ConfigPath: path, StateDir: state, UIPort: p.ui})
	require.ErrorContains(t, err, "exited before answering")
}

// A dev server that never answers is given up on within the start timeout
// and stopped.
func TestRunDevServerNeverAnswers(t *testing.T) {
	fakeCLI(t, `echo "fake server: starting"; exec sleep 60`)
	p := freePorts(t)
	path := writeMesh(t, p)
	began := time.Now()
	err := Run(context.Background(), Options{ConfigPath: path, StateDir: t.TempDir(), UIPort: p.ui, StartTimeout: time.Second, StopGrace: 5 * time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("did not answer on 127.0.0.1:%d (namespace default) within 1s", p.temporal))
	assert.Contains(t, err.Error(), "fake server: starting")
	assert.Less(t, time.Since(began), 15*time.Second, "the fake server is interrupted, not waited for")
}

// Ctrl-C while the dev server starts stops it and is not an error.
func TestRunInterruptedWhileStarting(t *testing.T) {
	fakeCLI(t, `exec sleep 60`)
	p := freePorts(t)
	path := writeMesh(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, Options{ConfigPath: path, StateDir: t.TempDir(), UIPort: p.ui, Out: &out, StopGrace: 5 * time.Second})
	require.NoError(t, err)
	assert.Contains(t, out.String(), "stopped")
}

// With no CLI of the pinned version anywhere, Run passes over the one of
// another version on PATH, naming it, and installs the pinned one into
// <state>/bin with go install, saying so first.
func TestRunInstallsCLI(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs shell scripts")
	}
	bin := t.TempDir()
	for _, tool := range []string{"git", "chmod"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	old := fakeTemporal(t, bin, "1.1.0", `echo "an old CLI was run"; exit 5`)
	// A fake go whose install writes a fake CLI that dies at once.
	fakeGo := `#!/bin/sh
echo "go $*" >&2
test "$1 $2" = "install ` + temporalcli.Package + `@` + temporalcli.Version + `" || exit 9
printf '#!/bin/sh\necho "installed fake server"; exit 4\n' > "$GOBIN/temporal"
chmod +x "$GOBIN/temporal"
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755))
	t.Setenv("PATH", bin)
	t.Setenv(temporalcli.Env, "")
	t.Setenv("GOBIN", "")
	t.Setenv("GOPATH", t.TempDir())

	r := runToFailure(t)
	state, out, err := r.state, r.out, r.err
	assert.Contains(t, err.Error(), "installed fake server", "the installed CLI is the one run")
	assert.Contains(t, out, "temporal   passing over "+old+" (on PATH) is Temporal CLI v1.1.0: the stack runs "+temporalcli.Version+"\n")
	assert.Contains(t, out, "installing the Temporal CLI "+temporalcli.Version+" into "+filepath.Join(state, "bin")+" with go install (none of that version found; a few minutes the first time")
	assert.Contains(t, out, "temporal   "+filepath.Join(state, "bin", "temporal")+"  (Temporal CLI "+temporalcli.Version+", installed in ")
	assert.FileExists(t, filepath.Join(state, "bin", "temporal"))
	log, err := os.ReadFile(filepath.Join(state, "logs", "install-temporal.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "go install "+temporalcli.Package)
}

// A mistyped module path is refused before anything starts, naming the
// key, its line and what to do.
func TestRunMistypedModulePath(t *testing.T) {
	p := freePorts(t)
	path := writeMesh(t, p)
	y, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, bytes.Replace(y, []byte("path: examples/host"), []byte("path: examples/hots"), 1), 0o644))
	state := filepath.Join(t.TempDir(), "state")
	var out bytes.Buffer
	err = Run(context.Background(), Options{ConfigPath: path, StateDir: state, UIPort: p.ui, Out: &out})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mesh config "+path+": 1 problem:\n  modules.host.path: \"examples/hots\" is not a directory in repository ")
	line := bytes.Count(y[:bytes.Index(y, []byte("path: examples/host"))], []byte("\n")) + 1
	assert.Contains(t, err.Error(), fmt.Sprintf("set it to module host's directory, relative to the repository's root (line %d)", line))
	assert.Empty(t, out.String(), "nothing started")
	assert.NoDirExists(t, state)
}

// MESHROLL_TEMPORAL_CLI naming another version is refused before anything
// starts: which binary, which version it is, which is wanted, what to do.
func TestRunRefusesAnotherVersionOfTheCLI(t *testing.T) {
	cli := fakeTemporal(t, t.TempDir(), "1.1.0", `echo "the old CLI was run"; exit 5`)
	t.Setenv(temporalcli.Env, cli)
	r := runToFailure(t)
	out, err := r.out, r.err
	assert.Contains(t, err.Error(), cli+" ($"+temporalcli.Env+") is Temporal CLI v1.1.0; meshroll runs Temporal CLI "+temporalcli.Version)
	assert.Contains(t, err.Error(), "point "+temporalcli.Env+" at a "+temporalcli.Version+" binary, or unset it")
	assert.NotContains(t, err.Error(), "the old CLI was run")
	assert.NotContains(t, out, "ready")
}

// A missing tool is one line naming it and the fix.
func TestRunMissingTools(t *testing.T) {
	p := freePorts(t)
	path := writeMesh(t, p)
	t.Setenv("PATH", t.TempDir())
	err := Run(context.Background(), Options{ConfigPath: path, StateDir: t.TempDir(), UIPort: p.ui})
	require.Error(t, err)
	assert.Equal(t, "git not found on PATH: install git (meshroll builds modules from their git commits) and run again", err.Error())
}

// Two stacks on one state directory are refused: they would share a
// Temporal database and host journals.
func TestLockState(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	unlock, err := lockState(dir)
	require.NoError(t, err)
	_, err = lockState(dir)
	require.EqualError(t, err, "state directory "+dir+" is in use by another dev stack: stop it, or pass another --state")
	require.NoError(t, unlock())
	unlock, err = lockState(dir)
	require.NoError(t, err)
	require.NoError(t, unlock())
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	assert.Equal(t, "examples/mesh.yaml", o.ConfigPath)
	assert.Equal(t, ".meshroll", o.StateDir)
	assert.Equal(t, 8233, o.UIPort)
	assert.Equal(t, "exec", o.Runtime)
	assert.Equal(t, DefaultStartTimeout, o.StartTimeout)
}

// runUntilReady runs the stack in the background on a real dev server,
// wrapped so that the server's pid lands in a file, and waits for ready.
func runUntilReady(t *testing.T, ctx context.Context, with ...func(*Options)) (p ports, state string, out *syncbuf.Buffer, pid func() int, result <-chan error) {
	t.Helper()
	cli := devlaunchtest.TemporalCLI(t, "devstack")
	pidFile := filepath.Join(t.TempDir(), "pid")
	fakeCLI(t, fmt.Sprintf("echo $$ > %q\nexec %q \"$@\"", pidFile, cli))
	p = freePorts(t)
	path := writeMesh(t, p)
	state = t.TempDir()
	out = &syncbuf.Buffer{}
	res := make(chan error, 1)
	o := Options{ConfigPath: path, StateDir: state, UIPort: p.ui, MetricsListen: fmt.Sprintf("127.0.0.1:%d", p.metrics), Out: out}
	for _, w := range with {
		w(&o)
	}
	go func() {
		res <- Run(ctx, o)
	}()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(out.String(), "\nready\n") {
		select {
		case err := <-res:
			t.Fatalf("Run ended before ready: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("not ready within 2 minutes:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	pid = func() int {
		b, err := os.ReadFile(pidFile)
		require.NoError(t, err)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		return n
	}
	return p, state, out, pid, res
}

// Ctrl-C stops everything and Run returns nil; every port is free again and
// the dev server is gone.
func TestRunStopsCleanly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, _, out, pid, res := runUntilReady(t, ctx)
	assert.Contains(t, out.String(), fmt.Sprintf("temporal   127.0.0.1:%d  (namespace default; Web UI http://127.0.0.1:%d;", p.temporal, p.ui))
	assert.Contains(t, out.String(), fmt.Sprintf("host       edge-1        http://127.0.0.1:%d  (tier 1, runtime exec)", p.edge))
	assert.Contains(t, out.String(), fmt.Sprintf("host       control-node  http://127.0.0.1:%d  (tier 2, runtime exec)", p.control))
	// Asked for, the worker's metrics are served, and the stack says where.
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", p.metrics)
	assert.Contains(t, out.String(), "metrics    "+metrics+"  (and /livez, /readyz")
	resp, err := http.Get(metrics)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "# HELP go_goroutines")
	// The fleet page is served, beside the Web UI, and answers.
	fleet := fmt.Sprintf("http://127.0.0.1:%d", p.fleet)
	assert.Contains(t, out.String(), fmt.Sprintf("fleet      %s  (the fleet page: what runs, what moves; read-only; its plans link to the Web UI http://127.0.0.1:%d)", fleet, p.ui))
	resp, err = http.Get(fleet + "/")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `<a href="/machines/control-node">control-node</a>`)
	// The merge receiver is served, says where its secret is, and answers
	// a ping signed with it.
	hook := fmt.Sprintf("http://127.0.0.1:%d/v1/webhooks/github", p.hook)
	assert.Contains(t, out.String(), fmt.Sprintf("webhooks   %s  (the merge receiver; also /gitlab and /gitea; its secret: cat ", hook))
	key := []byte("hook-s3cret")
	ping := []byte(`{"zen":"hi"}`)
	req, err := http.NewRequest(http.MethodPost, hook, bytes.NewReader(ping))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign(key, ping))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	server := pid()
	stopRun(t, cancel, res)
	assert.Contains(t, out.String(), "stopped    state kept in")
	require.NoError(t, checkPorts([]bind{
		{addr: fmt.Sprintf("127.0.0.1:%d", p.temporal)}, {addr: fmt.Sprintf("127.0.0.1:%d", p.ui)},
		{addr: fmt.Sprintf("127.0.0.1:%d", p.registry)}, {addr: fmt.Sprintf("127.0.0.1:%d", p.edge)},
		{addr: fmt.Sprintf("127.0.0.1:%d", p.control)}, {addr: fmt.Sprintf("127.0.0.1:%d", p.metrics)},
		{addr: fmt.Sprintf("127.0.0.1:%d", p.fleet)}, {addr: fmt.Sprintf("127.0.0.1:%d", p.hook)},
	}))
	proc, err := os.FindProcess(server)
	require.NoError(t, err)
	assert.Error(t, proc.Signal(syscall.Signal(0)), "the dev server has exited")
}

// A dev server that dies under the stack stops the rest, and Run's error
// names the server's log.
func TestRunDevServerDiesWhileRunning(t *testing.T) {
	_, state, _, pid, res := runUntilReady(t, context.Background())
	proc, err := os.FindProcess(pid())
	require.NoError(t, err)
	require.NoError(t, proc.Kill())
	select {
	case err := <-res:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the Temporal dev server exited while the stack was running (signal: killed); see "+filepath.Join(state, "logs", "temporal.log"))
	case <-time.After(time.Minute):
		t.Fatal("Run did not notice the dev server died")
	}
}

// stopRun cancels a Run, as Ctrl-C does, and waits for it to return
// cleanly within a minute.
func stopRun(t *testing.T, cancel context.CancelFunc, res <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-res:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of Ctrl-C")
	}
}
