package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/syncbuf"
)

// logsHost is a host agent serving the host API's logs: module host's
// output, then (follow) a line on every tick until the caller leaves.
type logsHost struct {
	mu  sync.Mutex
	got []host.LogsRequest
}

func (h *logsHost) Report(context.Context) (mesh.Report, error) { return mesh.Report{}, nil }
func (h *logsHost) Apply(context.Context, mesh.Declaration) (host.ApplyResult, error) {
	return host.ApplyResult{}, nil
}

func (h *logsHost) Logs(ctx context.Context, req host.LogsRequest, out io.Writer) error {
	h.mu.Lock()
	h.got = append(h.got, req)
	h.mu.Unlock()
	if req.Module != "host" {
		return &host.Refusal{Code: host.CodeNotFound, Message: "module " + req.Module + " is not declared on machine edge-1 (it runs host)"}
	}
	_, _ = io.WriteString(out, "example host module 1 running\n")
	host.Flush(out)
	if !req.Follow {
		return nil
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := io.WriteString(out, "tick\n"); err != nil {
				return err
			}
			host.Flush(out)
		}
	}
}

func (h *logsHost) last() host.LogsRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[len(h.got)-1]
}

func serveLogs(t *testing.T, token string) (*logsHost, string) {
	h := &logsHost{}
	srv := httptest.NewServer(host.NewHandler(h, token))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func TestMachineLogs(t *testing.T) {
	h, url := serveLogs(t, "")
	cfg := configWithHosts(t, url, url)
	r := run(t, "--config", cfg, "machine", "logs", "edge-1", "--module", "host", "--tail", "5")
	require.NoError(t, r.err)
	assert.Equal(t, "example host module 1 running\n", r.stdout)
	assert.Equal(t, host.LogsRequest{Module: "host", Tail: 5}, h.last())

	r = run(t, "--config", cfg, "machine", "logs", "edge-1", "--module", "host")
	require.NoError(t, r.err)
	assert.Equal(t, host.LogsRequest{Module: "host", Tail: host.DefaultLogTail}, h.last())
}

func TestMachineLogsUsage(t *testing.T) {
	cfg := writeConfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"edge-9", "--module", "host"}, `unknown machine "edge-9" (known: control-node, edge-1)`},
		{[]string{"control-node"}, "machine logs control-node needs --module: one of the modules the config gives it (mesh-controller, host)"},
		{[]string{"edge-1", "--module", "host", "--tail", "10001"}, "--tail 10001: want 0 to 10000 lines"},
		{[]string{"edge-1", "--module", "host", "--tail", "-1"}, "--tail -1: want 0 to 10000 lines"},
		{[]string{"edge-1", "--module", "../host"}, `--module: module name "../host" must be`},
		{[]string{"--module", "host"}, "takes one machine name"},
	} {
		r := run(t, append([]string{"--config", cfg, "machine", "logs"}, tc.args...)...)
		require.Error(t, r.err, tc.args)
		assert.Contains(t, r.err.Error(), tc.want, tc.args)
		assert.Equal(t, ExitUsage, ExitCode(r.err), tc.args)
		assert.Empty(t, r.stdout)
	}
}

func TestMachineLogsErrorsSayWhatToDo(t *testing.T) {
	_, url := serveLogs(t, "the-agents-token")
	cfg := configWithHosts(t, url, url)
	r := run(t, "--config", cfg, "machine", "logs", "edge-1", "--module", "host")
	require.Error(t, r.err)
	assert.Equal(t, ExitError, ExitCode(r.err))
	assert.Equal(t, "host "+url+" answered 401 Unauthorized: machine edge-1 has no token; set MESHROLL_MACHINES_EDGE_1_TOKEN (or machines.edge-1.token in the mesh config) to the host agent's own token (its --token-file, or MESHROLL_HOST_TOKEN)", r.err.Error())

	_, open := serveLogs(t, "")
	cfg = configWithHosts(t, open, open)
	r = run(t, "--config", cfg, "machine", "logs", "edge-1", "--module", "metrics")
	require.Error(t, r.err)
	assert.Equal(t, ExitError, ExitCode(r.err))
	assert.Equal(t, "machine edge-1 has no module metrics to show: module metrics is not declared on machine edge-1 (it runs host) (host "+open+`; the config gives it host; see "starter machine show edge-1")`, r.err.Error())

	old := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(old.Close)
	cfg = configWithHosts(t, old.URL, old.URL)
	r = run(t, "--config", cfg, "machine", "logs", "edge-1", "--module", "host")
	require.Error(t, r.err)
	assert.Equal(t, "machine edge-1 cannot show logs: host "+old.URL+` answered status 404: "404 page not found" to /v1/logs (an agent from before logs, or a fleet's own that serves none)`, r.err.Error())

	gone := "http://" + unreachable
	cfg = configWithHosts(t, gone, gone)
	r = run(t, "--config", cfg, "machine", "logs", "edge-1", "--module", "host")
	require.Error(t, r.err)
	assert.Equal(t, ExitError, ExitCode(r.err))
	assert.Contains(t, r.err.Error(), "machine edge-1: host "+gone+" did not answer: ")
	assert.Contains(t, r.err.Error(), "is its host agent running there, and is machines.edge-1.host right?")
}

// Ctrl-C (the context ending) ends a follow cleanly: exit 0, with what was
// printed until then.
func TestMachineLogsFollowEndsCleanlyOnInterrupt(t *testing.T) {
	h, url := serveLogs(t, "")
	cfg := configWithHosts(t, url, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- Execute(ctx, []string{"--config", cfg, "machine", "logs", "edge-1", "--module", "host", "--follow"}, out, io.Discard)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "tick\n") < 3 {
		require.True(t, time.Now().Before(deadline), "followed output: %q", out.String())
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
		assert.Equal(t, ExitOK, ExitCode(err))
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end on interrupt")
	}
	assert.True(t, strings.HasPrefix(out.String(), "example host module 1 running\ntick\n"), out.String())
	assert.True(t, h.last().Follow)
}
