package agentcmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/cmdrun"
)

// parseAndLoad parses args with the agent's flags and loads the settings,
// as the command does before serving.
func parseAndLoad(args []string) (settings, error) {
	fs := pflag.NewFlagSet("host", pflag.ContinueOnError)
	defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return settings{}, cmdrun.Usage(err)
	}
	return load(fs)
}

func TestMetricsSetting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		file    string
		want    bool
		wantErr string
	}{
		{name: "on by default", want: true},
		{name: "flag off", args: []string{"--metrics=false"}, want: false},
		{name: "variable off", env: map[string]string{"MESHROLL_HOST_METRICS": "false"}, want: false},
		{name: "file off", file: "metrics: false\n", want: false},
		{name: "flag beats variable", args: []string{"--metrics=true"}, env: map[string]string{"MESHROLL_HOST_METRICS": "false"}, want: true},
		{name: "bad variable", env: map[string]string{"MESHROLL_HOST_METRICS": "maybe"}, wantErr: `--metrics "maybe": want true or false`},
		{name: "bad file value", file: "metrics: sometimes\n", wantErr: `--metrics "sometimes": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append([]string{"--machine", "edge-1"}, tc.args...)
			if tc.file != "" {
				p := filepath.Join(t.TempDir(), "host.yaml")
				require.NoError(t, os.WriteFile(p, []byte(tc.file), 0o600))
				args = append(args, "--config", p)
			}
			s, err := parseAndLoad(args)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				var u *cmdrun.UsageError
				assert.ErrorAs(t, err, &u, "a bad setting is a usage error (exit 2)")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.metrics)
		})
	}
}

// Beyond loopback the host API needs a token, or the operator's word that
// only trusted hosts reach it; on loopback it needs neither.
func TestListenBeyondLoopback(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"loopback, no token", []string{"--listen", "127.0.0.1:7400"}, ""},
		{"localhost, no token", []string{"--listen", "localhost:7400"}, ""},
		{"IPv6 loopback, no token", []string{"--listen", "[::1]:7400"}, ""},
		{"every address, no token", []string{"--listen", "0.0.0.0:7400"}, "reaches beyond loopback and the host API has no token"},
		{"a LAN address, no token", []string{"--listen", "10.0.0.7:7400"}, "Set --token-file (or MESHROLL_HOST_TOKEN)"},
		{"every address, a token file", []string{"--listen", "0.0.0.0:7400", "--token-file", tokenFile}, ""},
		{"every address, a trusted network", []string{"--listen", "0.0.0.0:7400", "--trusted-network"}, ""},
		{"not an address", []string{"--listen", "7400"}, `--listen "7400": want host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MESHROLL_HOST_TOKEN", "")
			_, err := parseAndLoad(append([]string{"--machine", "edge-1"}, tc.args...))
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			var u *cmdrun.UsageError
			assert.ErrorAs(t, err, &u, "a usage error (exit 2)")
		})
	}
}
