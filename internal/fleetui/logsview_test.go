package fleetui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

var hostAndMetrics = cfg("edge-1:1:host,metrics")

// logsSection is the page's logs part, up to the next section.
func logsSection(t *testing.T, body string) string {
	t.Helper()
	i := strings.Index(body, `<h3 id="logs">`)
	require.GreaterOrEqual(t, i, 0, "a logs section")
	j := strings.Index(body[i:], "<h3>Its machine workflow</h3>")
	require.Greater(t, j, 0)
	return body[i : i+j]
}

// A machine's page shows the end of each module's output, escaped, with
// the command that follows it, and says of a module whose logs the host
// would not give why, in one line, without failing the page.
func TestMachineShowsLogs(t *testing.T) {
	src := edge1(nil)
	src.logs = map[string]string{"edge-1/host": "example host module 1 running\n<script>alert(1)</script>\n"}
	srv, _ := server(t, src, hostAndMetrics)
	code, body, _ := get(t, srv, "/machines/edge-1")
	require.Equal(t, http.StatusOK, code)
	logs := logsSection(t, body)
	assert.Contains(t, logs, `<h4>host <small>the last 20 lines; to follow: <code>starter machine logs edge-1 --module host --follow</code></small></h4>`)
	assert.Contains(t, logs, "<pre class=\"log\">example host module 1 running\n&lt;script&gt;alert(1)&lt;/script&gt;\n</pre>")
	assert.NotContains(t, body, "<script>alert(1)")
	// A module the config gives but no plan has put there yet is said
	// plainly, not as a problem, and offers no command that would fail.
	assert.Contains(t, logs, `<h4>metrics </h4>`)
	assert.Contains(t, logs, `<p>Not running on edge-1: no plan has put metrics here yet, so it has no output.</p>`)
	assert.NotContains(t, logs, `class="problem"`)

	_, frag, _ := get(t, srv, "/machines/edge-1?fragment=1")
	assert.Contains(t, logsSection(t, frag), "example host module 1 running", "the live part follows the logs too")
}

func TestMachineLogsWhenTheHostCannotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*fake)
		want  string
	}{
		{name: "unreachable", setup: func(f *fake) {
			f.logsErr = &host.UnreachableError{URL: "http://127.0.0.1:7401", Err: errors.New("connection refused")}
		}, want: `<p class="problem">The host did not give its logs: host http://127.0.0.1:7401: unreachable: connection refused</p>`},
		{name: "token", setup: func(f *fake) {
			f.logsErr = &host.RefusedError{Status: http.StatusUnauthorized, Code: host.CodeUnauthorized, Message: "missing or wrong bearer token"}
		}, want: "machine edge-1 has no token; set MESHROLL_MACHINES_EDGE_1_TOKEN"},
		{name: "noop", setup: func(f *fake) {
			f.logsErr = &host.RefusedError{Status: http.StatusNotImplemented, Code: host.CodeUnsupported, Message: "runtime noop keeps no container logs"}
		}, want: `<p class="problem">No logs: runtime noop keeps no container logs.</p>`},
		{name: "slow", setup: func(f *fake) { f.logsHang = true }, want: `<p class="problem">The host did not give its logs within 2s.</p>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := edge1(nil)
			tc.setup(src)
			srv, _ := server(t, src, hostAndMetrics)
			start := time.Now()
			code, body, _ := get(t, srv, "/machines/edge-1")
			require.Equal(t, http.StatusOK, code)
			assert.Less(t, time.Since(start), logsTimeout+2*time.Second, "a slow host holds the page up to logsTimeout")
			logs := logsSection(t, body)
			assert.Contains(t, logs, tc.want)
			assert.Equal(t, 2, strings.Count(logs, `class="problem"`), "one line a module")
			assert.Contains(t, body, "What runs, and why", "the rest of the page is there")
		})
	}
}

// A host that does not answer at all is said once, for the whole section.
func TestMachineLogsHostDown(t *testing.T) {
	src := edge1(nil)
	d := src.details["edge-1"]
	d.HostError = "host http://127.0.0.1:7401 unreachable: connection refused"
	src.details["edge-1"] = d
	src.logsErr = errors.New(d.HostError)
	srv, _ := server(t, src, hostAndMetrics)
	_, body, _ := get(t, srv, "/machines/edge-1")
	logs := logsSection(t, body)
	assert.Contains(t, logs, "<p>Unknown: the host did not answer.</p>")
	assert.NotContains(t, logs, "problem")
}

// The worker's Reader asks the machine's host with its token, and keeps
// the end of a long answer.
func TestReaderLogs(t *testing.T) {
	long := strings.Repeat("x", 3*logBytes) + "\nthe end\n"
	agent := httptest.NewServer(host.NewHandler(logsAgent{"host": long}, "tok"))
	t.Cleanup(agent.Close)
	c := cfg("edge-1:1:host")
	m := c.Machines["edge-1"]
	m.Host, m.Token = agent.URL, "tok"
	c.Machines["edge-1"] = m
	r := Reader{Config: c, Catalogue: catalogue.NewMemory()}

	text, err := r.Logs(context.Background(), "edge-1", "host", 20)
	require.NoError(t, err)
	assert.Len(t, text, logBytes+len("…"))
	assert.True(t, strings.HasPrefix(text, "…x"), text[:10])
	assert.True(t, strings.HasSuffix(text, "\nthe end\n"))

	_, err = r.Logs(context.Background(), "edge-1", "web", 20)
	r2, ok := host.IsRefused(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, host.CodeNotFound, r2.Code)

	_, err = r.Logs(context.Background(), "edge-9", "host", 20)
	assert.ErrorIs(t, err, errUnknownMachine)
}

// logsAgent is a host agent with fixed output per module.
type logsAgent map[string]string

func (logsAgent) Report(context.Context) (mesh.Report, error) { return mesh.Report{}, nil }
func (logsAgent) Apply(context.Context, mesh.Declaration) (host.ApplyResult, error) {
	return host.ApplyResult{}, nil
}

func (a logsAgent) Logs(_ context.Context, req host.LogsRequest, out io.Writer) error {
	text, ok := a[req.Module]
	if !ok {
		return &host.Refusal{Code: host.CodeNotFound, Message: "module " + req.Module + " is not declared"}
	}
	_, err := io.WriteString(out, text)
	return err
}
