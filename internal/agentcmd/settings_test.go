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
