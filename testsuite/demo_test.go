package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/demo"
	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/registry"
)

// `starter demo` end to end, as an operator runs it against the dev stack: a
// Temporal dev server and an embedded registry, a config pointing at them,
// and the demo's own mesh in process. The stale host plan must report the
// controller rebased, and the control node must end on a newer controller
// than the one the host plan recorded.
func TestDemoShowsStalePlanRebased(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t, devserver.Options{})
	reg, err := registry.New(t.TempDir())
	require.NoError(t, err)
	url, err := reg.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })

	// The demo brings its own mesh; the config only says where Temporal and
	// the registry are (one module and machine make it a valid config).
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	cfg := fmt.Sprintf(`temporal: {address: %q, namespace: default}
registry: {address: %q}
modules:
  host: {repo: ., path: examples/host}
machines:
  edge-1: {host: "http://127.0.0.1:1", tier: 1, modules: [host]}
`, srv.HostPort(), url)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	err = cli.Execute(ctx, []string{"--config", path, "demo", "--gap", "1s", "--output", "json"}, &out, &errb)
	require.NoError(t, err, "stderr:\n%s", errb.String())

	var sum demo.Summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &sum), "stdout:\n%s", out.String())
	require.Contains(t, sum.Rebased, demo.ModuleController, "the host plan reports the rebase")
	cp := sum.ControlPlane
	require.Greater(t, cp.After.Generation, cp.Before.Generation, "the control node runs a newer controller than the host plan recorded")
	require.False(t, cp.Downgraded)
	require.Len(t, sum.Plans, 4)
	for _, m := range []string{demo.MachineEdge, demo.MachineControl} {
		require.NotEmpty(t, sum.Journals[m], "%s's journal", m)
	}
	t.Logf("narration:\n%s", errb.String())
	// The narration is the demo's words only: no log record of the
	// worker's or the agents' in it.
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		require.False(t, strings.HasPrefix(strings.TrimSpace(line), "{"), "a raw log line in the narration: %s", line)
	}

	// Its plans and machine workflows are in a namespace of its own; the
	// mesh's namespace has none of them.
	for _, id := range []string{meshapi.MachineID(demo.MachineEdge), sum.Plans[0].ID} {
		_, err := srv.Client().DescribeWorkflow(ctx, id, "")
		var nf *serviceerror.NotFound
		require.ErrorAs(t, err, &nf, "%s in the mesh's namespace", id)
	}
	dc, err := client.Dial(client.Options{HostPort: srv.HostPort(), Namespace: demo.DefaultNamespace})
	require.NoError(t, err)
	defer dc.Close()
	_, err = dc.DescribeWorkflow(ctx, sum.Plans[0].ID, "")
	require.NoError(t, err, "the demo's plan in namespace %s", demo.DefaultNamespace)

	// A second demo on the same server (its machine workflows and plans
	// from the first are there) works too, here with the table output.
	out.Reset()
	errb.Reset()
	err = cli.Execute(ctx, []string{"--config", path, "demo", "--gap", "1s"}, &out, &errb)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	require.Contains(t, out.String(), "NOT downgraded")
	require.Contains(t, out.String(), "rebased [mesh-controller]")
	// Each container names the plan that brought its build, not the last
	// one that declared the machine (the host plan keeps the controller).
	require.Regexp(t, `mesh-controller +[0-9a-f]{12} +generation \d+ +running +brought by plan/mesh-controller/`, out.String())
}

// Without the dev stack the demo fails in one line saying what to start.
func TestDemoSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	closed := closedAddr(t)
	reg, err := registry.New(t.TempDir())
	require.NoError(t, err)
	url, err := reg.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })

	for name, c := range map[string]struct{ temporal, registry, want string }{
		"temporal": {closed, url, "Temporal unreachable at " + closed},
		"registry": {closed, "http://" + closed, "registry http://" + closed + " unreachable"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mesh.yaml")
			require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`temporal: {address: %q}
registry: {address: %q}
modules: {host: {repo: ., path: examples/host}}
machines: {edge-1: {host: "http://127.0.0.1:1", tier: 1, modules: [host]}}
`, c.temporal, c.registry)), 0o644))
			var out, errb bytes.Buffer
			err := cli.Execute(context.Background(), []string{"--config", path, "demo"}, &out, &errb)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.Contains(t, err.Error(), "start the dev stack first: go run ./worker --dev")
			require.NotContains(t, err.Error(), "\n")
			require.Equal(t, cli.ExitError, cli.ExitCode(err))
		})
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
