package workercmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/cmdrun"
)

// clearEnv keeps the test's MESHROLL_* variables from reaching the command.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "MESHROLL_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	var out bytes.Buffer
	err := Execute(context.Background(), []string{"--help"}, &out, &out, "")
	require.NoError(t, err)
	assert.Equal(t, cmdrun.ExitOK, cmdrun.ExitCode(err))
	for _, flag := range []string{"--config", "--log-level", "--log-format", "--dev", "--state", "--ui-port", "--runtime", "--metrics-listen", "--build-id", "--make-current"} {
		assert.Contains(t, out.String(), flag)
	}
}

// Every refusal comes before the worker dials Temporal, so none needs a
// server. Flags cobra cannot parse exit 2 (stdlib flag's exit code for
// them); the rest exit 1, as they always did.
func TestRefusedCommandLines(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mesh.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`temporal: {address: "127.0.0.1:1", task_queue: q}
state_dir: `+filepath.Join(dir, "state")+`
modules:
  svc: {repo: ., path: svc}
machines:
  edge-1: {host: "http://127.0.0.1:1", tier: 0, modules: [svc]}
`), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--colour"}, cmdrun.ExitUsage, "unknown flag: --colour"},
		// pflag reads -config as the shorthands -c -o -n ...
		{"single-dash long flag", []string{"-config", cfg}, cmdrun.ExitUsage, "unknown shorthand flag: 'c' in -config"},
		{"bad value", []string{"--dev", "--ui-port", "x"}, cmdrun.ExitUsage, `invalid argument "x"`},
		{"unexpected arguments", []string{"--config", cfg, "run"}, cmdrun.ExitError, `unexpected arguments ["run"]`},
		{"dev flags without --dev", []string{"--state", dir}, cmdrun.ExitError, "--state, --ui-port, --runtime and --docker-socket go with --dev"},
		{"docker socket without the docker runtime", []string{"--dev", "--docker-socket", "/run/x.sock"}, cmdrun.ExitError, "--docker-socket goes with --runtime docker"},
		{"worker flags with --dev", []string{"--dev", "--build-id", "b"}, cmdrun.ExitError, "--build-id and --make-current do not go with --dev"},
		{"bad log level", []string{"--config", cfg, "--log-level", "loud"}, cmdrun.ExitError, "unknown log level"},
		{"make-current without versioning", []string{"--config", cfg, "--make-current"}, cmdrun.ExitError, "--make-current needs worker.versioning.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Execute(context.Background(), tc.args, &out, &out, "")
			require.Error(t, err)
			assert.Equal(t, tc.code, cmdrun.ExitCode(err), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
