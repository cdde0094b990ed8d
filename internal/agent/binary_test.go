package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// buildHost builds the real host binary once per test.
func buildHost(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the host binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build the host binary")
	}
	bin := filepath.Join(t.TempDir(), "host")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/meshroll/meshroll/host").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// cleanEnv is the test's environment without MESHROLL_HOST_* settings, so
// the agent sees only what a case gives it.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefixForTest) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

const envPrefixForTest = "MESHROLL_HOST_"

// proc is a running host binary.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	stderr strings.Builder
	done   chan struct{}
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startHost starts the binary and waits for its "listening" line, which
// names the address it bound (it is started on port 0).
func startHost(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = env
	pipe, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			var l struct {
				Message string `json:"message"`
				Address string `json:"address"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "host agent listening" {
				addr <- l.Address
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	select {
	case p.addr = <-addr:
	case <-p.done:
		_ = p.cmd.Wait()
		t.Fatalf("host exited before listening:\n%s", p.log())
	case <-time.After(waitLimit):
		t.Fatalf("host did not report listening:\n%s", p.log())
	}
	return p
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	<-p.done
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// poll calls f until it is true; the host is another process, so there is
// nothing to wait on but its answers.
func poll(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHostBinary(t *testing.T) {
	bin := buildHost(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "host.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("machine: edge-1\nlog_format: json\nruntime: noop\n"), 0o600))
	const token = "s3cret-t0ken"
	env := cleanEnv(envPrefixForTest + "TOKEN=" + token)
	args := []string{"--config", cfg, "--listen", "127.0.0.1:0", "--state", state}

	p := startHost(t, bin, env, args...)
	base := "http://" + p.addr
	resp, err := http.Get(base + host.PathHealthz)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, RuntimeNoop, resp.Header.Get(HeaderRuntime))

	c, err := host.NewHTTPClient(base, token, nil)
	require.NoError(t, err)
	ctx := context.Background()
	d := decl(1, ctr("web", 5))
	res, err := c.Apply(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, host.ApplyResult{Seq: 1}, res)
	poll(t, "web running", func() bool {
		rep, err := c.Report(ctx)
		require.NoError(t, err)
		w, ok := rep.Running("web")
		return ok && w.State == mesh.StateRunning
	})
	anon, err := host.NewHTTPClient(base, "", nil)
	require.NoError(t, err)
	_, err = anon.Report(ctx)
	requireRefused(t, err, host.CodeUnauthorized)

	assert.Equal(t, 0, p.stop(t), p.log())
	log := p.log()
	assert.NotContains(t, log, token, "the token is never logged")
	assert.Contains(t, log, `"message":"declaration applied"`)
	assert.Contains(t, log, `"seq":1`)
	assert.Contains(t, log, ctr("web", 5).Digest)
	assert.Contains(t, log, `"message":"host agent stopped"`)

	// A restarted agent reports what it had, and its journal.
	p = startHost(t, bin, env, args...)
	c, err = host.NewHTTPClient("http://"+p.addr, token, nil)
	require.NoError(t, err)
	rep, err := c.Report(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), rep.LastSeq)
	assert.Equal(t, d.Request, rep.LastRequest)
	w, ok := rep.Running("web")
	require.True(t, ok)
	assert.Equal(t, d.Containers[0], w.Declared())
	// The restart restarted web; its "running" entry is journalled before
	// the report says running, so wait for that to keep the journal's order
	// below fixed.
	poll(t, "web running again", func() bool {
		rep, err := c.Report(ctx)
		require.NoError(t, err)
		w, ok := rep.Running("web")
		return ok && w.State == mesh.StateRunning
	})
	res, err = c.Apply(ctx, d)
	require.NoError(t, err)
	assert.True(t, res.Repeat)
	_, err = c.Apply(ctx, decl(2, ctr("web", 4)))
	requireRefused(t, err, host.CodeDowngrade, "the floor survived the restart")

	req, err := http.NewRequest(http.MethodGet, "http://"+p.addr+PathJournal+"?limit=2", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var page JournalPage
	require.NoError(t, json.Unmarshal(b, &page))
	require.Len(t, page.Entries, 2)
	assert.Equal(t, OutcomeRefused, page.Entries[0].Outcome)
	assert.Equal(t, OutcomeRepeat, page.Entries[1].Outcome)
	assert.NotZero(t, page.NextBefore)
	assert.Equal(t, 0, p.stop(t), p.log())
}

func TestHostBinaryFailures(t *testing.T) {
	bin := buildHost(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	badCfg := filepath.Join(t.TempDir(), "host.yaml")
	require.NoError(t, os.WriteFile(badCfg, []byte("machine: edge-1\nlisten_on: x\n"), 0o600))

	cases := []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"no machine", nil, nil, 2, "--machine is required"},
		{"bad machine", []string{"--machine", "Edge/1"}, nil, 2, "machine name"},
		{"unknown flag", []string{"--machine", "m", "--colour"}, nil, 2, "unknown flag"},
		{"unknown runtime", []string{"--machine", "m", "--runtime", "podman"}, nil, 2, "unknown runtime"},
		{"exec runtime without CA file", []string{"--machine", "m", "--runtime", "exec", "--registry", "127.0.0.1:5000", "--registry-ca-file", filepath.Join(t.TempDir(), "none.pem")}, nil, 1, "registry CA file"},
		{"bad registry address", []string{"--machine", "m", "--runtime", "exec", "--registry", "https://u:a b@127.0.0.1/x"}, nil, 2, "--registry"},
		{"registry password without user", []string{"--machine", "m", "--runtime", "exec", "--registry", "127.0.0.1:5000"}, []string{envPrefixForTest + "REGISTRY_PASSWORD=a b"}, 2, "basic auth needs both"},
		{"runtime from env", []string{"--machine", "m"}, []string{envPrefixForTest + "RUNTIME=docker"}, 1, "runtime docker"},
		{"bad log level", []string{"--machine", "m", "--log-level", "loud"}, nil, 2, "log level"},
		{"unknown config key", []string{"--config", badCfg}, nil, 2, "unknown keys listen_on"},
		{"missing config", []string{"--config", filepath.Join(t.TempDir(), "nope.yaml")}, nil, 1, "read config"},
		{"token with space", []string{"--machine", "m"}, []string{envPrefixForTest + "TOKEN=a b"}, 2, "token contains spaces"},
		{"port in use", []string{"--machine", "m", "--listen", busy.Addr().String()}, nil, 1, "address " + busy.Addr().String() + " is already in use"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append(tc.args, "--state", t.TempDir())...)
			cmd.Env = cleanEnv(tc.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "want a failing exit, got %v: %s", err, out)
			assert.Equal(t, tc.code, ee.ExitCode(), "%s", out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.NotEmpty(t, lines)
			last := lines[len(lines)-1]
			assert.True(t, strings.HasPrefix(last, "host: "), "%s", out)
			assert.Contains(t, last, tc.want, "one clear line")
			assert.NotContains(t, string(out), "a b")
		})
	}
}

// The host client reads the real binary's journal page by page.
func TestHostClientReadsJournal(t *testing.T) {
	bin := buildHost(t)
	p := startHost(t, bin, cleanEnv(), "--machine", "edge-1", "--listen", "127.0.0.1:0", "--state", t.TempDir(), "--log-format", "json")
	c, err := host.NewHTTPClient("http://"+p.addr, "", nil)
	require.NoError(t, err)
	ctx := context.Background()
	for seq := uint64(1); seq <= 3; seq++ {
		_, err := c.Apply(ctx, decl(seq, ctr("web", int64(seq))))
		require.NoError(t, err)
	}
	page, err := c.Journal(ctx, 0, 2)
	require.NoError(t, err)
	require.Len(t, page.Entries, 2)
	require.Equal(t, "edge-1", page.Machine)
	require.NotZero(t, page.NextBefore)
	require.Equal(t, []uint64{3, 2, 1}, appliedSeqs(t, c, 2), "newest first, every apply once")
	assert.Equal(t, 0, p.stop(t), p.log())
}

// appliedSeqs reads the whole journal through the client, pageSize entries
// at a time, and returns the sequences of its applies, newest first.
func appliedSeqs(t *testing.T, c *host.HTTPClient, pageSize int) []uint64 {
	t.Helper()
	var applied []uint64
	for before := uint64(0); ; {
		pg, err := c.Journal(context.Background(), before, pageSize)
		require.NoError(t, err)
		for _, e := range pg.Entries {
			if e.Outcome == OutcomeApplied {
				applied = append(applied, e.Seq)
			}
		}
		if pg.NextBefore == 0 {
			return applied
		}
		before = pg.NextBefore
	}
}
