//go:build unix

package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent/execrt/execrttest"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// The real host binary with the exec runtime, as a machine runs it: images
// built in the test, pulled by digest from a registry on loopback, run as
// processes; the protocol's refusals over the wire; and a SIGKILL while a
// declaration is being applied, after which the restarted agent's journal
// is honest and the machine converges.
func TestHostBinaryExecRuntime(t *testing.T) {
	bin := buildHost(t)
	reg := execrttest.NewRegistry(t)
	img1 := execrttest.AppImage(t, nil, "serve", "v1")
	v1 := reg.Push(t, "meshroll/web", img1)
	v2 := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v2"))
	state := t.TempDir()
	const token = "exec-t0ken"
	args := []string{"--machine", testMachine, "--listen", "127.0.0.1:0", "--state", state, "--log-format", "json",
		"--runtime", "exec", "--registry", reg.Host(), "--registry-insecure", "--exec-healthy-after", "100ms"}
	env := cleanEnv(envPrefixForTest + "TOKEN=" + token)
	p := startHost(t, bin, env, args...)
	c, err := host.NewHTTPClient("http://"+p.addr, token, nil)
	require.NoError(t, err)
	ctx := context.Background()
	web := func(pushed execrttest.Pushed, gen int64) mesh.Container {
		return mesh.Container{Module: "web", Digest: pushed.Digest, Generation: gen, Image: pushed.Image}
	}
	running := func(c *host.HTTPClient, digest string) func() bool {
		return func() bool {
			rep, err := c.Report(ctx)
			if err != nil {
				return false
			}
			w, ok := rep.Running("web")
			return ok && w.Digest == digest && w.State == mesh.StateRunning
		}
	}
	logFile := filepath.Join(state, "logs", "web.log")
	logHas := func(s string) func() bool {
		return func() bool { b, _ := os.ReadFile(logFile); return strings.Contains(string(b), s) }
	}

	// Apply, report, replace.
	d1 := decl(1, web(v1, 1))
	_, err = c.Apply(ctx, d1)
	require.NoError(t, err)
	poll(t, "v1 running", running(c, v1.Digest))
	poll(t, "v1 printed", logHas("testapp v1 mode serve"))
	d2 := decl(2, web(v2, 2))
	_, err = c.Apply(ctx, d2)
	require.NoError(t, err)
	poll(t, "v2 running", running(c, v2.Digest))
	poll(t, "v1 stopped", logHas("testapp v1 got SIGTERM"))

	// The protocol's refusals, over the wire.
	res, err := c.Apply(ctx, d2)
	require.NoError(t, err)
	assert.True(t, res.Repeat, "an exact repeat is acknowledged, not applied")
	_, err = c.Apply(ctx, decl(2, web(v1, 3)))
	r := requireRefused(t, err, host.CodeSequence)
	assert.Equal(t, uint64(2), r.LastSeq)
	wrong, err := host.NewHTTPClient("http://"+p.addr, "wrong", nil)
	require.NoError(t, err)
	_, err = wrong.Apply(ctx, decl(3, web(v1, 3)))
	requireRefused(t, err, host.CodeUnauthorized)

	// A digest the image does not have is never run.
	// The registry answers a digest nobody pushed with v1's manifest.
	raw, err := img1.RawManifest()
	require.NoError(t, err)
	forged := execrttest.Digest([]byte("an image nobody built"))
	reg.Lie(forged, raw)
	lie := mesh.Container{Module: "liar", Digest: forged, Generation: 1, Image: v1.Image}
	_, err = c.Apply(ctx, decl(3, web(v2, 2), lie))
	require.NoError(t, err)
	poll(t, "the mismatched image refused", func() bool {
		rep, err := c.Report(ctx)
		if err != nil {
			return false
		}
		l, ok := rep.Running("liar")
		return ok && l.State == mesh.StateExited && l.Reason != ""
	})
	_, err = os.Stat(filepath.Join(state, "logs", "liar.log"))
	assert.True(t, os.IsNotExist(err), "the mismatched image never started")

	// SIGKILL while a declaration is being applied: the answer has come,
	// the runtime is still replacing v2.
	d4 := decl(4, web(v1, 3))
	_, err = c.Apply(ctx, d4)
	require.NoError(t, err)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
	_ = p.cmd.Wait()

	p = startHost(t, bin, env, args...)
	c, err = host.NewHTTPClient("http://"+p.addr, token, nil)
	require.NoError(t, err)
	poll(t, "converged after the restart", running(c, v1.Digest))
	rep, err := c.Report(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), rep.LastSeq)

	assert.Equal(t, []uint64{4, 3, 2, 1}, appliedSeqs(t, c, 100), "every declaration applied exactly once, none claimed twice")
	assert.Equal(t, 0, p.stop(t), p.log())
	assert.NotContains(t, p.log(), token)
}
