package testsuite

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/fleetui"
)

// logsMesh is module host, built into real images, on one machine whose
// agent asks a token, run by the exec runtime or (docker) on the test
// engine.
func logsMesh(docker bool) stackOptions {
	o := execHostMesh([]machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}})
	o.tokens = true
	if docker {
		o.exec, o.docker = false, true
	}
	return o
}

// `starter machine logs` through the real config, token and host agent of
// the exec runtime: the running build's output, --tail over the log file
// every build of the module appended to, a --follow that sees the
// container's last words when a roll-out replaces it and then ends by
// itself, and one ended by Ctrl-C with exit 0.
func TestMachineLogsExec(t *testing.T) {
	t.Parallel()
	s := newStack(t, logsMesh(false))
	l := machineLogs(s)

	// Every build appends to the module's log: the first build's line is
	// there, and the last three lines are the second's start alone (the
	// agent's "starting" and "started pid" lines and the program's).
	tail := l.run("--tail", "3")
	require.Len(t, lines(tail), 3, tail)
	require.Regexp(t, lineOf(l.version), tail)
	require.NotRegexp(t, lineOf(l.first), tail)
	require.Regexp(t, lineOf(l.first), l.run("--tail", "100"))
	require.Empty(t, l.run("--tail", "0"))
	l.fleetPageShows()

	l.followUntilReplaced()
	l.followUntilInterrupted()
}

// The same on the docker runtime and the real engine: the engine's logs of
// the container that runs now (a replaced build's container is gone with
// its logs).
func TestMachineLogsDocker(t *testing.T) {
	t.Parallel()
	s := newStack(t, logsMesh(true))
	l := machineLogs(s)

	require.Equal(t, l.version+"\n", l.run("--tail", "1"))
	require.Equal(t, l.version+"\n", l.run("--tail", "100"), "the replaced build's container went with its logs")
	require.Empty(t, l.run("--tail", "0"))
	l.fleetPageShows()

	l.followUntilReplaced()
	l.followUntilInterrupted()
}

// logsCheck drives `starter machine logs edge-1 --module host` on a stack
// that has rolled out two builds of host; version is the line the running
// build printed when it started, first the first build's.
type logsCheck struct {
	*stack
	first, version string
}

func machineLogs(s *stack) *logsCheck {
	l := &logsCheck{stack: s}
	s.converge("host", s.commit("host"))
	l.first = l.versionLine()
	l.waitFor(l.first)
	s.converge("host", s.commit("host"))
	l.version = l.versionLine()
	out := l.waitFor(l.version)
	s.t.Logf("$ starter machine logs edge-1 --module host\n%s", out)
	return l
}

// versionLine is what the newest commit of host prints at start (see
// exampleProgram).
func (l *logsCheck) versionLine() string {
	b, err := os.ReadFile(filepath.Join(l.repo, "examples", "host", "version.txt"))
	require.NoError(l.t, err)
	return "host " + string(b)
}

// run runs the command with args and returns its output.
func (l *logsCheck) run(args ...string) string {
	l.t.Helper()
	out, err := l.starter(append([]string{"machine", "logs", "edge-1", "--module", "host"}, args...)...)
	require.NoError(l.t, err, out)
	return out
}

// waitFor runs the command until its output has line: a process writes its
// first line a moment after it counts running.
func (l *logsCheck) waitFor(line string) string {
	l.t.Helper()
	var out string
	eventually(l.t, 30*time.Second, "machine logs shows "+line, func() bool {
		out = l.run()
		return regexp.MustCompile(lineOf(line)).MatchString(out)
	})
	return out
}

// follow starts `machine logs --follow` until ctx ends; its output
// and its end (the command's error) are returned.
func (l *logsCheck) follow(ctx context.Context) (*lockedOutput, <-chan error) {
	out := &lockedOutput{}
	done := make(chan error, 1)
	go func() {
		done <- cli.Execute(ctx, []string{"--config", l.configPath, "machine", "logs", "edge-1", "--module", "host", "--tail", "5", "--follow"}, out, &lockedOutput{})
	}()
	return out, done
}

// followUntilReplaced follows the running build, rolls out the next one and
// sees the old container's "stopping" (printed at its SIGTERM, after the
// follow began), after which the follow ends by itself, exit 0.
func (l *logsCheck) followUntilReplaced() {
	l.t.Helper()
	out, done := l.follow(context.Background())
	eventually(l.t, 30*time.Second, "the follow shows "+l.version, func() bool {
		return regexp.MustCompile(lineOf(l.version)).MatchString(out.String())
	})
	l.converge("host", l.commit("host"))
	select {
	case err := <-done:
		require.NoError(l.t, err, out.String())
	case <-time.After(time.Minute):
		l.t.Fatalf("the follow did not end when its container was replaced; it printed:\n%s", out.String())
	}
	got := "\n" + out.String()
	running, stopping := strings.Index(got, "\n"+l.version+"\n"), strings.LastIndex(got, "\nstopping\n")
	require.True(l.t, running >= 0 && stopping > running, "the replaced container's last words, printed after the follow began:\n%s", out.String())
	l.version = l.versionLine()
}

// followUntilInterrupted follows the running build and ends it as Ctrl-C
// does: exit 0.
func (l *logsCheck) followUntilInterrupted() {
	l.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, done := l.follow(ctx)
	eventually(l.t, 30*time.Second, "the follow shows "+l.version, func() bool {
		return regexp.MustCompile(lineOf(l.version)).MatchString(out.String())
	})
	cancel()
	select {
	case err := <-done:
		require.NoError(l.t, err)
		require.Equal(l.t, cli.ExitOK, cli.ExitCode(err))
	case <-time.After(30 * time.Second):
		l.t.Fatal("the follow did not end on Ctrl-C")
	}
}

// fleetPageShows reads the machine's page of the fleet page, as the worker
// serves it, and finds the running build's line among the last lines of
// the module's output, read from the host with the machine's token.
func (l *logsCheck) fleetPageShows() {
	l.t.Helper()
	page, err := fleetui.New(fleetui.Options{
		Source: fleetui.Reader{Config: l.cfg, Client: l.c, Catalogue: l.cat},
		Config: l.cfg, Log: zerolog.Nop(),
	})
	require.NoError(l.t, err)
	srv := httptest.NewServer(page)
	defer srv.Close()
	var body string
	eventually(l.t, 30*time.Second, "the fleet page's machine view has read the fleet", func() bool {
		resp, err := http.Get(srv.URL + "/machines/edge-1")
		require.NoError(l.t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(l.t, err)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	require.Contains(l.t, body, `<h4>host <small>the last 20 lines`)
	// The running build's line is among the last: the agent's "started
	// pid" line may come before or after it, as the program may print
	// before the agent has written that it started.
	require.Regexp(l.t, `<pre class="log">([^<]*\n)?`+regexp.QuoteMeta(l.version)+`\n[^<]*</pre>`, body)
}

// lineOf matches s as a whole line.
func lineOf(s string) string { return `(?m)^` + regexp.QuoteMeta(s) + `$` }

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// lockedOutput is a command's output, read while it writes.
type lockedOutput struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *lockedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *lockedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
