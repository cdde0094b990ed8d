package agentcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/cmdrun"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/host"
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

// lockedBuffer is a bytes.Buffer the agent's goroutines can log to while the
// test reads it. It closes seen once a write holds awaited.
type lockedBuffer struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	awaited  string
	seen     chan struct{}
	wasShown bool
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.awaited != "" && !b.wasShown && bytes.Contains(p, []byte(b.awaited)) {
		b.wasShown = true
		close(b.seen)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An agent started with --enroll asks the worker's endpoint to let its
// machine in once it serves, and keeps serving whatever the answer.
func TestEnrollOnStart(t *testing.T) {
	const token = "enr-s3cret-token"
	tokenFile := filepath.Join(t.TempDir(), "enroll-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	for _, tc := range []struct {
		name      string
		advertise string // "" for the default
		status    int
		answer    enroll.Answer
		wantLog   string
	}{
		{"pending, advertised", "http://10.0.0.7:7400", http.StatusAccepted,
			enroll.Answer{State: enroll.StatePending}, "enrollment pending: an operator admits this machine with `starter machine approve edge-1`"},
		{"denied, the default advertised", "", http.StatusForbidden,
			enroll.Answer{State: enroll.StateDenied, Message: "turned away by ops"}, "enrollment denied: turned away by ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"TOKEN", "ENROLL_TOKEN", "LABELS", "ADVERTISE", "ENROLL_EVERY", "CONFIG", "MACHINE"} {
				t.Setenv("MESHROLL_HOST_"+k, "")
			}
			type asked struct {
				method, path, auth, contentType string
				ask                             enroll.Ask
			}
			asks := make(chan asked, 10)
			worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				a := asked{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type")}
				assert.NoError(t, json.NewDecoder(r.Body).Decode(&a.ask))
				select {
				case asks <- a:
				default:
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				assert.NoError(t, json.NewEncoder(w).Encode(tc.answer))
			}))
			t.Cleanup(worker.Close)

			args := []string{"--machine", "edge-1", "--runtime", "noop", "--listen", "127.0.0.1:0", "--state", t.TempDir(),
				"--log-format", "json", "--enroll", worker.URL, "--enroll-token-file", tokenFile,
				"--labels", "site=lab,ring=canary", "--enroll-every", "1h"}
			if tc.advertise != "" {
				args = append(args, "--advertise", tc.advertise)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout lockedBuffer
			stderr := lockedBuffer{awaited: tc.wantLog, seen: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- Execute(ctx, args, &stdout, &stderr) }()
			select {
			case <-stderr.seen: // the answer is logged: the agent asked
			case err := <-done:
				t.Fatalf("the agent stopped before its enrollment was answered: %v\n%s", err, stderr.String())
			}

			a := <-asks
			assert.Equal(t, http.MethodPost, a.method)
			assert.Equal(t, enroll.Path, a.path)
			assert.Equal(t, "Bearer "+token, a.auth)
			assert.Equal(t, "application/json", a.contentType)
			assert.Equal(t, "edge-1", a.ask.Machine)
			assert.Equal(t, map[string]string{"site": "lab", "ring": "canary"}, a.ask.Labels)
			if tc.advertise != "" {
				assert.Equal(t, tc.advertise, a.ask.Host)
			} else {
				// The port bound, not --listen's 0: the agent answers there,
				// whatever the enrollment's answer.
				assert.True(t, strings.HasPrefix(a.ask.Host, "http://127.0.0.1:"), a.ask.Host)
				assert.False(t, strings.HasSuffix(a.ask.Host, ":0"), a.ask.Host)
				resp, err := http.Get(a.ask.Host + host.PathReport)
				require.NoError(t, err)
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}

			cancel()
			require.NoError(t, <-done, stderr.String())
			assert.NotContains(t, stderr.String(), token, "the token is never logged")
			assert.Empty(t, stdout.String())
		})
	}
}
