package agentcmd

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/cmdrun"
)

func TestHelpExitsZero(t *testing.T) {
	var out bytes.Buffer
	err := Execute(context.Background(), []string{"--help"}, &out, &out)
	require.NoError(t, err)
	assert.Equal(t, cmdrun.ExitOK, cmdrun.ExitCode(err))
	assert.Contains(t, out.String(), "host --machine NAME [flags]")
	assert.Contains(t, out.String(), "MESHROLL_HOST_<FLAG>")
	for flag := range keys {
		assert.Contains(t, out.String(), "--"+keys[flag], "every setting is a flag")
	}
}

// Command lines refused before anything starts exit 2, with one line that
// main prints after "host: ".
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--machine", "m", "--colour"}, "unknown flag: --colour"},
		// pflag reads -machine as the shorthands -m -a -c ...
		{"single-dash long flag", []string{"-machine", "m"}, "unknown shorthand flag: 'm' in -machine"},
		{"bad value", []string{"--machine", "m", "--metrics=maybe"}, `invalid argument "maybe"`},
		{"unexpected arguments", []string{"--machine", "m", "serve"}, `unexpected arguments ["serve"]`},
		{"no machine", []string{"--state", t.TempDir()}, "--machine is required"},
		{"beyond loopback without a token", []string{"--machine", "m", "--listen", "0.0.0.0:7499", "--state", t.TempDir()},
			"--listen 0.0.0.0:7499 reaches beyond loopback and the host API has no token"},
		{"every address without a token", []string{"--machine", "m", "--listen", ":7499", "--state", t.TempDir()},
			"or pass --trusted-network if only trusted hosts can reach the address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MESHROLL_HOST_MACHINE", "")
			t.Setenv("MESHROLL_HOST_CONFIG", "")
			t.Setenv("MESHROLL_HOST_TOKEN", "")
			var out bytes.Buffer
			err := Execute(context.Background(), tc.args, &out, &out)
			require.Error(t, err)
			assert.Equal(t, cmdrun.ExitUsage, cmdrun.ExitCode(err), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, out.String(), "the error is main's to print, once")
		})
	}
}
