package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/syncbuf"
)

// The dev stack as a user runs it: `worker --dev` on the example mesh (a
// copy in a scratch repository, on free ports), a merge of the example host
// module through the starter binary until every machine runs the new
// digest; then a second merge gated before tier 2, the stack interrupted
// and started again on the same state directory while the plan waits, and
// the plan approved and converged after the restart.
func TestDevstackMergeRestartConverges(t *testing.T) {
	t.Parallel()
	cli := dsTemporalCLI(t)
	bins := dsBuild(t, "worker", "starter")
	m := dsScratchMesh(t)
	state := t.TempDir()

	st := dsStartStack(t, bins, m, state, cli)
	dsWebUIAnswers(t, m.ui)

	// A merge converges, and every machine running host runs its build.
	c1 := m.commitHost(t)
	var merged struct{ Plan, State string }
	out := dsStarter(t, bins, m, "merge", "--module", "host", "--commit", c1, "--wait", "--output", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &merged), out)
	require.Equal(t, meshapi.PlanID("host", c1), merged.Plan)
	require.Equal(t, string(meshapi.PlanConverged), merged.State, out)
	d1 := dsPlanDigest(t, bins, m, merged.Plan)
	for _, machine := range []string{"edge-1", "edge-2", "control-node"} {
		require.Equal(t, d1, m.runningDigest(t, bins, machine, "host"), "%s runs the merged build", machine)
	}

	// A second merge waits at the gate before tier 2: the edges run it,
	// the control node does not yet.
	c2 := m.commitHost(t)
	id := meshapi.PlanID("host", c2)
	dsStarter(t, bins, m, "merge", "--module", "host", "--commit", c2, "--gate", "2", "--output", "json")
	gated := dsWaitPlan(t, bins, m, id, meshapi.PlanGated)
	require.NotNil(t, gated.Build)
	d2 := gated.Build.Digest
	require.NotEqual(t, d1, d2)
	require.Equal(t, d2, m.runningDigest(t, bins, "edge-1", "host"))
	require.Equal(t, d2, m.runningDigest(t, bins, "edge-2", "host"))
	require.Equal(t, d1, m.runningDigest(t, bins, "control-node", "host"))

	// Ctrl-C mid-plan stops the stack cleanly; started again on the same
	// state it resumes the plan, which an approve then finishes.
	st.interrupt(t)
	require.Contains(t, st.stdout.String(), "stopped")
	st = dsStartStack(t, bins, m, state, cli)
	require.Equal(t, meshapi.PlanGated, dsPlanShow(t, bins, m, id).State, "the plan survived the restart")
	out = dsStarter(t, bins, m, "plan", "approve", id)
	require.Contains(t, out, "tier 2")
	done := dsWaitPlan(t, bins, m, id, meshapi.PlanConverged)
	require.Equal(t, d2, done.Build.Digest)
	for _, machine := range []string{"edge-1", "edge-2", "control-node"} {
		require.Equal(t, d2, m.runningDigest(t, bins, machine, "host"), "%s runs the second build after the restart", machine)
	}
	st.interrupt(t)
}

// A port in use is one line on stderr naming the port and its setting, and
// a non-zero exit, before anything starts.
func TestDevstackPortInUse(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker binary; skipped with -short")
	}
	bins := dsBuild(t, "worker")
	m, _ := dsScratchMeshHolding(t, true)
	state := filepath.Join(t.TempDir(), "state")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "worker"), "--dev", "--config", m.config, "--state", state, "--ui-port", strconv.Itoa(m.ui))
	cmd.Env = dsEnv("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
	require.Equal(t, 1, exit.ExitCode())
	require.Equal(t, fmt.Sprintf("worker: port %s (temporal.address) is in use: stop what holds it (another dev stack?) or change temporal.address in %s\n", m.temporal, m.config), stderr.String())
	require.Empty(t, stdout.String())
	require.NoDirExists(t, state, "nothing is created before the checks pass")
}

// dsTemporalCLI finds the Temporal CLI as the other integration tests do:
// skipped with -short or when missing, failing when missing in CI.
func dsTemporalCLI(t *testing.T) string {
	t.Helper()
	devserver.Require(t)
	cli, err := devserver.CLIPath()
	require.NoError(t, err)
	return cli
}

// dsBuild puts the named commands of this module, built, in a temporary
// directory of t's own and returns it. Each command is built once per test
// binary (builtCommand) and linked into the directory: a warm `go build`
// of the worker still costs seconds of CPU, and a dozen tests ask for it.
func dsBuild(t *testing.T, cmds ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range cmds {
		bin, err := builtCommand(c)
		require.NoError(t, err)
		dst := filepath.Join(dir, c)
		if os.Link(bin, dst) != nil {
			b, err := os.ReadFile(bin)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(dst, b, 0o755))
		}
	}
	return dir
}

// built holds the commands built for this test binary, in a directory
// TestMain removes.
var built struct {
	mu   sync.Mutex
	dir  string
	bins map[string]*builtBin
}

type builtBin struct {
	once sync.Once
	path string
	err  error
}

// builtCommand builds the module's command c once, however many tests ask
// at once, and returns the binary's path.
func builtCommand(c string) (string, error) {
	built.mu.Lock()
	if built.bins == nil {
		dir, err := os.MkdirTemp("", "meshroll-testbins-")
		if err != nil {
			built.mu.Unlock()
			return "", err
		}
		built.dir, built.bins = dir, map[string]*builtBin{}
	}
	b := built.bins[c]
	if b == nil {
		b = &builtBin{path: filepath.Join(built.dir, c)}
		built.bins[c] = b
	}
	built.mu.Unlock()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", b.path, "github.com/meshroll/meshroll/"+c).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w: %s", c, err, out)
		}
	})
	return b.path, b.err
}

// dsEnv is this process's environment without MESHROLL_* settings (which
// would override the test's mesh), plus the CLI to run.
func dsEnv(cli string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MESHROLL_") {
			env = append(env, kv)
		}
	}
	if cli != "" {
		env = append(env, devserver.CLIEnv+"="+cli)
	}
	return env
}

// dsMesh is a scratch git repository holding a copy of the example modules
// and a copy of examples/mesh.yaml on free ports.
type dsMesh struct {
	repo, config string
	temporal     string
	ui           int
	hosts        map[string]string // machine -> host URL
	version      int
	fleet        string // where the stack serves the fleet page (worker.ui_listen)
	// hook and hookSecret are where the stack serves the merge receiver
	// and the file holding its secret.
	hook, hookSecret string
}

func dsScratchMesh(t *testing.T) *dsMesh {
	t.Helper()
	m, _ := dsScratchMeshHolding(t, false)
	return m
}

// dsScratchMeshHolding is dsScratchMesh; with holdTemporal, its
// temporal.address stays listened on by the listener returned (closed at
// the test's end), so that no other test can take the port between its
// pick and the test's use of it as a port in use.
func dsScratchMeshHolding(t *testing.T, holdTemporal bool) (*dsMesh, net.Listener) {
	t.Helper()
	m := &dsMesh{repo: t.TempDir(), hosts: map[string]string{}}
	for _, mod := range []string{"controller", "host", "metrics"} {
		src, err := os.ReadFile(filepath.Join("..", "examples", mod, "main.go"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(m.repo, "examples", mod), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(m.repo, "examples", mod, "main.go"), src, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(m.repo, "go.mod"), []byte("module example.com/mesh\n\ngo 1.26\n"), 0o644))
	m.git(t, "init", "-q", "-b", "main")
	m.git(t, "add", ".")
	m.git(t, "commit", "-q", "-m", "example modules")

	y, err := os.ReadFile(filepath.Join("..", "examples", "mesh.yaml"))
	require.NoError(t, err)
	free := func() string { return fmt.Sprintf("127.0.0.1:%d", pickPort(t)) }
	m.temporal = free()
	var temporal net.Listener
	if holdTemporal {
		temporal, err = net.Listen("tcp", m.temporal)
		require.NoError(t, err)
		t.Cleanup(func() { _ = temporal.Close() })
	}
	m.ui = pickPort(t)
	registryAddr := free()
	repl := []string{"127.0.0.1:7233", m.temporal, "127.0.0.1:5000", registryAddr, "repo: ..,", "repo: .,"}
	for machine, port := range map[string]string{"control-node": "7400", "edge-1": "7401", "edge-2": "7402"} {
		addr := free()
		m.hosts[machine] = "http://" + addr
		repl = append(repl, "http://127.0.0.1:"+port, m.hosts[machine])
	}
	cfg := strings.NewReplacer(repl...).Replace(string(y))
	// A default left unrewritten is a port of its own, not the digits
	// inside a picked one (127.0.0.1:37233).
	for _, old := range []string{`\b7233\b`, `\b5000\b`, `\b740[0-2]\b`, `repo: \.\.`, `worker:`} {
		require.NotRegexp(t, old, cfg, "examples/mesh.yaml changed shape; update this test's rewriting")
	}
	m.fleet = free()
	// The merge receiver and the enrollment endpoint on ports of their
	// own too, the receiver with a secret of the test's, so that stacks
	// run side by side.
	m.hook, m.hookSecret = free(), filepath.Join(m.repo, ".git", "hook-secret")
	require.NoError(t, os.WriteFile(m.hookSecret, []byte(hookSecret+"\n"), 0o600))
	cfg += fmt.Sprintf("worker: {ui_listen: %q, webhook_listen: %q, webhook_secret_file: %q, enroll_listen: %q, enroll_token_file: %q}\n",
		m.fleet, m.hook, m.hookSecret, free(), m.hookSecret)
	m.config = filepath.Join(m.repo, "mesh.yaml")
	require.NoError(t, os.WriteFile(m.config, []byte(cfg), 0o644))
	return m, temporal
}

func (m *dsMesh) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", m.repo}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=meshroll", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=meshroll", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

var versionRE = regexp.MustCompile(`const version = "[^"]*"`)

// commitHost changes the example host module's version and commits it on
// main, returning the commit.
func (m *dsMesh) commitHost(t *testing.T) string {
	t.Helper()
	p := filepath.Join(m.repo, "examples", "host", "main.go")
	src, err := os.ReadFile(p)
	require.NoError(t, err)
	m.version++
	changed := versionRE.ReplaceAll(src, fmt.Appendf(nil, `const version = "devstack-%d"`, m.version))
	require.NotEqual(t, string(src), string(changed), "examples/host/main.go has no version constant to change")
	require.NoError(t, os.WriteFile(p, changed, 0o644))
	m.git(t, "commit", "-q", "-am", fmt.Sprintf("host version %d", m.version))
	return m.git(t, "rev-parse", "HEAD")
}

// runningDigest asks `starter machine show --output json` what the
// machine runs, as an operator would.
func (m *dsMesh) runningDigest(t *testing.T, bins, machine, module string) string {
	t.Helper()
	out := dsStarter(t, bins, m, "machine", "show", machine, "--output", "json")
	var shown struct {
		Machine    string `json:"machine"`
		Seq        uint64 `json:"seq"`
		Containers []struct {
			Module, Digest, Plan, State string
			Generation                  int64
		} `json:"containers"`
		Journal []struct {
			Seq  uint64 `json:"seq"`
			Plan string `json:"plan"`
		} `json:"journal"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.Equal(t, machine, shown.Machine)
	require.NotZero(t, shown.Seq)
	require.NotEmpty(t, shown.Journal, "machine show has the journal's latest entries")
	for _, c := range shown.Containers {
		if c.Module == module {
			require.Equal(t, mesh.StateRunning, c.State, "%s's %s", machine, module)
			require.NotZero(t, c.Generation)
			return c.Digest
		}
	}
	t.Fatalf("%s runs no %s: %s", machine, module, out)
	return ""
}

// dsStack is a running `worker --dev`.
type dsStack struct {
	cmd            *exec.Cmd
	stdout, stderr *dsBuffer
	done           chan struct{}
	err            error
}

// dsStartStack runs the dev stack as a user would and waits for "ready".
func dsStartStack(t *testing.T, bins string, m *dsMesh, state, cli string) *dsStack {
	t.Helper()
	s := &dsStack{stdout: &dsBuffer{}, stderr: &dsBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(bins, "worker"), "--dev", "--config", m.config, "--state", state,
		"--ui-port", strconv.Itoa(m.ui), "--log-level", "info", "--log-format", "json")
	s.cmd.Env = dsEnv(cli)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	require.NoError(t, s.cmd.Start())
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.done:
			case <-time.After(time.Minute):
				_ = s.cmd.Process.Kill()
				<-s.done
			}
		}
		if t.Failed() {
			t.Logf("dev stack (pid %d) stdout:\n%s\nstderr (last lines):\n%s\ntemporal.log (last lines):\n%s",
				s.cmd.Process.Pid, s.stdout.String(), dsLastLines(s.stderr.String(), 60),
				dsLastLines(dsRead(filepath.Join(state, "logs", "temporal.log")), 30))
		}
	})

	deadline := time.After(3 * time.Minute)
	for !s.stdout.hasLine("ready") {
		select {
		case <-s.done:
			t.Fatalf("the dev stack exited before ready (%v):\n%s\n%s", s.err, s.stdout.String(), dsLastLines(s.stderr.String(), 30))
		case <-deadline:
			t.Fatalf("the dev stack was not ready within 3 minutes:\n%s", s.stdout.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	out := s.stdout.String()
	for _, want := range []string{"temporal   " + m.temporal, "Web UI http://127.0.0.1:" + strconv.Itoa(m.ui), "registry   http://", "catalogue  sqlite:",
		"host       edge-1        " + m.hosts["edge-1"], "host       control-node  " + m.hosts["control-node"], "worker     task queue meshroll",
		"fleet      http://" + m.fleet + "  (the fleet page"} {
		require.Contains(t, out, want)
	}
	return s
}

// dsWebUIAnswers checks the Web UI serves on the printed port.
func dsWebUIAnswers(t *testing.T, port int) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	var last string
	for range 100 {
		resp, err := c.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the Web UI at %s does not answer: %s", url, last)
}

// interrupt sends Ctrl-C and requires a clean exit.
func (s *dsStack) interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(os.Interrupt))
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the dev stack did not stop within 2 minutes of an interrupt:\n%s", s.stdout.String())
	}
	require.NoError(t, s.err, "the dev stack exits 0 on Ctrl-C; stderr:\n%s", dsLastLines(s.stderr.String(), 30))
}

// dsStarter runs the starter binary against the mesh and returns its
// stdout; it must succeed.
func dsStarter(t *testing.T, bins string, m *dsMesh, args ...string) string {
	t.Helper()
	out, errOut, err := dsStarterRun(bins, m, args...)
	require.NoError(t, err, "starter %v:\n%s\n%s", args, out, errOut)
	return out
}

func dsStarterRun(bins string, m *dsMesh, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "starter"), append([]string{"--config", m.config}, args...)...)
	cmd.Env = dsEnv("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func dsPlanShow(t *testing.T, bins string, m *dsMesh, id string) meshapi.PlanState {
	t.Helper()
	out := dsStarter(t, bins, m, "plan", "show", id, "--output", "json")
	var st meshapi.PlanState
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	return st
}

// dsPlanDigest is the digest the plan built.
func dsPlanDigest(t *testing.T, bins string, m *dsMesh, id string) string {
	t.Helper()
	st := dsPlanShow(t, bins, m, id)
	require.NotNil(t, st.Build, "plan %s has no build", id)
	require.NoError(t, mesh.ValidDigest(st.Build.Digest))
	return st.Build.Digest
}

// dsWaitPlan polls plan show until the plan is in state, failing if it
// ends in another.
func dsWaitPlan(t *testing.T, bins string, m *dsMesh, id string, state meshapi.PlanStatus) meshapi.PlanState {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var st meshapi.PlanState
	for time.Now().Before(deadline) {
		out, errOut, err := dsStarterRun(bins, m, "plan", "show", id, "--output", "json")
		if err == nil {
			st = meshapi.PlanState{}
			require.NoError(t, json.Unmarshal([]byte(out), &st), out)
			if st.State == state {
				return st
			}
			if st.State.Terminal() {
				t.Fatalf("plan %s ended %s (%s), want %s", id, st.State, st.Reason, state)
			}
		} else if !strings.Contains(errOut+err.Error(), "not found") {
			t.Logf("plan show %s: %v: %s", id, err, errOut)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("plan %s did not reach %s within 3 minutes; it is %s (%s)", id, state, st.State, st.Reason)
	return st
}

// dsBuffer is a process's output, written by its pipes while the test
// reads it.
type dsBuffer struct{ syncbuf.Buffer }

func (b *dsBuffer) hasLine(line string) bool {
	for _, l := range strings.Split(b.String(), "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func dsRead(path string) string {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "(none)"
	}
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func dsLastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
