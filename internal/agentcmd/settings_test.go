package agentcmd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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
			s, err := loadMachine(t, tc.args, tc.file)
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

func TestEnrollSettings(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "enroll-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("  enr-s3cret\n"), 0o600))
	emptyFile := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(emptyFile, []byte("\n"), 0o600))
	enrolling := []string{"--enroll", "http://worker:8236", "--enroll-token-file", tokenFile}
	with := func(args ...string) []string { return append(append([]string{}, enrolling...), args...) }
	// want is what the enrollment settings come to.
	type want struct {
		enroll, token, advertise string
		labels                   map[string]string
		every                    time.Duration
	}
	enrolled := want{enroll: "http://worker:8236", token: "enr-s3cret", every: 15 * time.Second}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		file string
		want want
		// wantErr is part of the error; every one is a usage error (exit 2)
		// unless notUsage.
		wantErr  string
		notUsage bool
	}{
		{name: "no enrollment by default"},
		{name: "a token file, trimmed", args: enrolling, want: enrolled},
		{name: "a token variable", args: []string{"--enroll", "http://worker:8236"},
			env: map[string]string{"MESHROLL_HOST_ENROLL_TOKEN": "enr-s3cret"}, want: enrolled},
		{name: "from the config file", file: "enroll: http://worker:8236\nenroll_token_file: " + tokenFile + "\nlabels: site=lab\nenroll_every: 1m\n",
			want: want{enroll: "http://worker:8236", token: "enr-s3cret", labels: map[string]string{"site": "lab"}, every: time.Minute}},
		{name: "an https URL with a path", args: []string{"--enroll", "https://worker.example/meshroll/", "--enroll-token-file", tokenFile},
			want: want{enroll: "https://worker.example/meshroll/", token: "enr-s3cret", every: 15 * time.Second}},
		{name: "no token", args: []string{"--enroll", "http://worker:8236"},
			wantErr: "--enroll needs the mesh's enrollment token: set --enroll-token-file (or MESHROLL_HOST_ENROLL_TOKEN)"},
		{name: "a token file and a variable", args: enrolling, env: map[string]string{"MESHROLL_HOST_ENROLL_TOKEN": "other"},
			wantErr: "give the enrollment token either in MESHROLL_HOST_ENROLL_TOKEN or in --enroll-token-file, not both"},
		{name: "an empty token file", args: []string{"--enroll", "http://worker:8236", "--enroll-token-file", emptyFile},
			wantErr: "enrollment token file " + emptyFile + " is empty", notUsage: true},
		{name: "a missing token file", args: []string{"--enroll", "http://worker:8236", "--enroll-token-file", filepath.Join(dir, "nope")},
			wantErr: "enrollment token file: open", notUsage: true},
		{name: "a token no header carries", args: []string{"--enroll", "http://worker:8236"}, env: map[string]string{"MESHROLL_HOST_ENROLL_TOKEN": "two words"},
			wantErr: "the enrollment token contains spaces or control characters"},

		{name: "labels", args: with("--labels", "site=lab, ring=canary,example.com/hw=x86_64,spare="),
			want: want{enroll: "http://worker:8236", token: "enr-s3cret", every: 15 * time.Second,
				labels: map[string]string{"site": "lab", "ring": "canary", "example.com/hw": "x86_64", "spare": ""}}},
		{name: "labels from a variable", args: enrolling, env: map[string]string{"MESHROLL_HOST_LABELS": "site=lab"},
			want: want{enroll: "http://worker:8236", token: "enr-s3cret", every: 15 * time.Second, labels: map[string]string{"site": "lab"}}},
		{name: "labels as a list in the file", args: enrolling, file: "labels: [site=lab, ring=canary]\n",
			want: want{enroll: "http://worker:8236", token: "enr-s3cret", every: 15 * time.Second, labels: map[string]string{"site": "lab", "ring": "canary"}}},
		{name: "a label without =", args: with("--labels", "site=lab,canary"), wantErr: `--labels: "canary" is not k=v`},
		{name: "a bad label key", args: with("--labels", "my site=lab"), wantErr: `--labels: "my site" is not a label key`},
		{name: "a bad label value", args: with("--labels", "site=lab 2"), wantErr: `--labels: label site: "lab 2" is not a label value`},
		{name: "a label twice", args: with("--labels", "site=lab,site=home"), wantErr: "--labels: label site is given twice"},

		{name: "an advertised URL", args: with("--advertise", "https://edge-1.lan:7400"),
			want: want{enroll: "http://worker:8236", token: "enr-s3cret", every: 15 * time.Second, advertise: "https://edge-1.lan:7400"}},
		{name: "an advertised address without a scheme", args: with("--advertise", "edge-1.lan:7400"),
			wantErr: `--advertise "edge-1.lan:7400": want an absolute http(s) URL, such as http://10.0.0.7:7400`},
		{name: "an advertised path", args: with("--advertise", "/v1"), wantErr: `--advertise "/v1": want an absolute http(s) URL`},
		{name: "every address, nothing advertised", args: with("--listen", "0.0.0.0:7400", "--trusted-network"),
			wantErr: "--enroll with --listen 0.0.0.0:7400 needs --advertise"},
		{name: "every address, advertised", args: with("--listen", ":7400", "--trusted-network", "--advertise", "http://10.0.0.7:7400"),
			want: want{enroll: "http://worker:8236", token: "enr-s3cret", every: 15 * time.Second, advertise: "http://10.0.0.7:7400"}},

		{name: "a pace", args: with("--enroll-every", "2m"),
			want: want{enroll: "http://worker:8236", token: "enr-s3cret", every: 2 * time.Minute}},
		{name: "a pace of 0", args: with("--enroll-every", "0s"), wantErr: `--enroll-every "0s": want a duration above 0`},
		{name: "a pace that is no duration", env: map[string]string{"MESHROLL_HOST_ENROLL_EVERY": "often"}, args: enrolling,
			wantErr: `--enroll-every "often": want a duration above 0`},

		{name: "an enrollment URL without a scheme", args: []string{"--enroll", "worker:8236", "--enroll-token-file", tokenFile},
			wantErr: `--enroll "worker:8236": want an absolute http(s) URL, such as http://worker:8236`},
		{name: "an enrollment URL with a password", args: []string{"--enroll", "http://me:pw-s3cret@worker:8236", "--enroll-token-file", tokenFile},
			wantErr: `--enroll "http://me:xxxxx@worker:8236": no user or password in the URL`},
		{name: "an enrollment URL with a query", args: []string{"--enroll", "http://worker:8236/?token=x", "--enroll-token-file", tokenFile},
			wantErr: "no query or fragment in a base URL"},
		{name: "not a URL", args: []string{"--enroll", "http://worker:8236/%zz", "--enroll-token-file", tokenFile},
			wantErr: "--enroll: not a URL"},

		{name: "labels without --enroll", args: []string{"--labels", "site=lab"}, wantErr: "--labels is for enrollment and needs --enroll"},
		{name: "advertise without --enroll", args: []string{"--advertise", "http://10.0.0.7:7400"}, wantErr: "--advertise is for enrollment and needs --enroll"},
		{name: "a pace without --enroll", args: []string{"--enroll-every", "1m"}, wantErr: "--enroll-every is for enrollment and needs --enroll"},
		{name: "a pace variable without --enroll", env: map[string]string{"MESHROLL_HOST_ENROLL_EVERY": "1m"}, wantErr: "--enroll-every is for enrollment and needs --enroll"},
		{name: "a token file without --enroll", args: []string{"--enroll-token-file", tokenFile}, wantErr: "--enroll-token-file is for enrollment and needs --enroll"},
		{name: "a token variable without --enroll", env: map[string]string{"MESHROLL_HOST_ENROLL_TOKEN": "enr-s3cret"},
			wantErr: "MESHROLL_HOST_ENROLL_TOKEN is for enrollment and needs --enroll"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"TOKEN", "ENROLL", "ENROLL_TOKEN", "ENROLL_TOKEN_FILE", "LABELS", "ADVERTISE", "ENROLL_EVERY", "CONFIG"} {
				t.Setenv("MESHROLL_HOST_"+k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			s, err := loadMachine(t, tc.args, tc.file)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				var u *cmdrun.UsageError
				assert.Equal(t, !tc.notUsage, errors.As(err, &u), "a usage error (exit 2): %v", err)
				assert.NotContains(t, err.Error(), "s3cret", "no secret in an error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, want{enroll: s.enroll, token: s.enrollToken, advertise: s.advertise, labels: s.labels, every: s.enrollEvery})
		})
	}
}

// The advertised URL defaults to --listen's host (a name stays a name, as a
// TLS certificate holds it) at the port the agent bound.
func TestAdvertiseURL(t *testing.T) {
	for _, tc := range []struct {
		listen, bound string
		tls           bool
		want          string
	}{
		{"127.0.0.1:7400", "127.0.0.1:7400", false, "http://127.0.0.1:7400"},
		{"127.0.0.1:0", "127.0.0.1:41234", false, "http://127.0.0.1:41234"},
		{"edge-1.lan:7400", "10.0.0.7:7400", true, "https://edge-1.lan:7400"},
		{"[::1]:0", "[::1]:5555", false, "http://[::1]:5555"},
	} {
		assert.Equal(t, tc.want, advertiseURL(tc.listen, tc.bound, tc.tls), "%s bound at %s", tc.listen, tc.bound)
	}
}

// loadMachine loads the settings of an agent for edge-1 given args and,
// when file is set, a --config file holding it.
func loadMachine(t *testing.T, args []string, file string) (settings, error) {
	t.Helper()
	args = append([]string{"--machine", "edge-1"}, args...)
	if file != "" {
		p := filepath.Join(t.TempDir(), "host.yaml")
		require.NoError(t, os.WriteFile(p, []byte(file), 0o600))
		args = append(args, "--config", p)
	}
	return parseAndLoad(args)
}
