package testsuite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/liveness"
	"github.com/meshroll/meshroll/internal/telemetry/scrape"
)

// The worker binary as deployed: the build ID linked in with -ldflags,
// metrics and probes on worker.metrics_listen, the fleet page on
// worker.ui_listen behind the token in worker.ui_token_file, versioning
// from the config, and --make-current making its build the deployment's
// current version.
func TestWorkerBinaryServesProbesAndJoinsItsDeployment(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t, devserver.Options{})
	dir := t.TempDir()
	bin := filepath.Join(dir, "worker")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	out, err := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.buildID=bin-1", "-o", bin, "github.com/meshroll/meshroll/worker").CombinedOutput()
	cancel()
	require.NoError(t, err, "go build worker: %s", out)

	metricsAddr := "127.0.0.1:" + freePort(t)
	fleetAddr := "127.0.0.1:" + freePort(t)
	tokenFile := filepath.Join(dir, "ui-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("fleet-s3cret\n"), 0o600))
	cfg := fmt.Sprintf(`temporal: {address: %q, task_queue: worker-binary}
state_dir: %q
registry: {listen: "127.0.0.1:%s"}
modules:
  svc: {repo: ., path: examples/svc}
machines:
  edge-1: {host: "http://127.0.0.1:1", tier: 0, modules: [svc]}
worker:
  metrics_listen: %q
  ui_listen: %q
  ui_token_file: %q
  versioning: {enabled: true, deployment_name: mesh-bin}
`, srv.HostPort(), filepath.Join(dir, "state"), freePort(t), metricsAddr, fleetAddr, tokenFile)
	cfgPath := filepath.Join(dir, "mesh.yaml")
	// The worker checks at start that the module's path is in its repo.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "examples", "svc"), 0o755))
	gitOut, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput()
	require.NoError(t, err, "git init: %s", gitOut)
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))

	cmd := exec.Command(bin, "--config", cfgPath, "--make-current", "--log-format", "json")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MESHROLL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr dsBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", stderr.String())
		}
	})

	base := "http://" + metricsAddr
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(base + liveness.PathReady)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for the worker binary's %s to answer 200 (last: %v)", liveness.PathReady, err)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
	resp, err := http.Get(base + liveness.PathLive)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	m, err := scrape.Get(context.Background(), base+"/metrics")
	require.NoError(t, err)
	_, ok := m.Value("temporal_worker_start_total", map[string]string{"task_queue": "worker-binary"})
	assert.True(t, ok, "the SDK's metrics of the worker's task queue are served")

	// The fleet page asks for the token from the file, and shows the fleet
	// to whoever gives it.
	resp, err = http.Get("http://" + fleetAddr + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, err := http.NewRequest(http.MethodGet, "http://"+fleetAddr+"/machines/edge-1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer fleet-s3cret")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(page), "The host did not answer: host http://127.0.0.1:1 unreachable")
	assert.Contains(t, stderr.String(), `"machines":1,`, "the start line counts the machines: at ten thousand, their names would be one line of 130 KB")
	assert.Regexp(t, regexp.QuoteMeta(`"address":"`+fleetAddr+`",`)+`"time":"[^"]+",`+regexp.QuoteMeta(`"message":"serving the fleet page (read-only)"`), stderr.String())

	h := srv.Client().WorkerDeploymentClient().GetHandle("mesh-bin")
	deadline = time.Now().Add(time.Minute)
	for {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := h.Describe(dctx, client.WorkerDeploymentDescribeOptions{})
		cancel()
		if err == nil && d.Info.RoutingConfig.CurrentVersion != nil && d.Info.RoutingConfig.CurrentVersion.BuildID == "bin-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for build bin-1 (linked in with -ldflags) to be current in deployment mesh-bin: %+v, %v", d, err)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
	assert.Contains(t, stderr.String(), `"build_id":"bin-1"`, "the worker logs the build it announces")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	stopped = true
	select {
	case err := <-exited:
		assert.NoError(t, err, "SIGTERM stops the worker cleanly")
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("worker did not stop within a minute of SIGTERM")
	}
}
