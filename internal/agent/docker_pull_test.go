package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/secret"
)

// The engine pulls an image of the configured registry with its
// credentials (X-Registry-Auth), and any other image without them.
func TestDockerPullsWithTheRegistrysCredentials(t *testing.T) {
	var mu sync.Mutex
	auths := map[string]string{}
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths[r.URL.Query().Get("fromImage")] = r.Header.Get("X-Registry-Auth")
		mu.Unlock()
		_, _ = w.Write([]byte(`{"status":"Downloaded"}` + "\n"))
	}))
	t.Cleanup(engine.Close)
	rt, err := NewDockerRuntime("edge-1", engine.URL).WithRegistry(registry.Options{
		Address: "http://10.0.0.9:5000", Username: "hosts", Password: secret.String("pull-secret")})
	require.NoError(t, err)

	const ours, theirs = "10.0.0.9:5000/meshroll/host@sha256:aa", "docker.example/library/busybox@sha256:bb"
	require.NoError(t, rt.pull(context.Background(), ours))
	require.NoError(t, rt.pull(context.Background(), theirs))

	raw, err := base64.URLEncoding.DecodeString(auths[ours])
	require.NoError(t, err, "X-Registry-Auth is base64url JSON")
	var got map[string]string
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Equal(t, map[string]string{"username": "hosts", "password": "pull-secret", "serveraddress": "10.0.0.9:5000"}, got)
	require.Empty(t, auths[theirs], "another registry's image is pulled without them")
}

// A pull the registry did not answer is tried again, the container
// reported starting with why and when it tries next, until it is pulled; a
// pull the registry turns away is not, since no wait can mend it.
func TestDockerRetriesAPullOnlyWhileTheRegistryMayAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		message  string
		attempts int
		pulled   bool
	}{
		{"a registry down a moment", 2, `Get "http://10.0.0.9:5000/v2/": dial tcp 10.0.0.9:5000: connect: connection refused`, 3, true},
		{"a wrong credential", 1000, `Head "http://10.0.0.9:5000/v2/meshroll/host/manifests/sha256:aa": unauthorized: authentication required`, 1, false},
		{"an image that is not there", 1000, "manifest for 10.0.0.9:5000/meshroll/host@sha256:aa not found: manifest unknown", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			attempts := 0
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				attempts++
				failing := attempts <= tc.failures
				mu.Unlock()
				if failing {
					w.WriteHeader(http.StatusInternalServerError)
					_ = json.NewEncoder(w).Encode(map[string]string{"message": tc.message})
					return
				}
				_, _ = w.Write([]byte(`{"status":"Downloaded"}` + "\n"))
			}))
			t.Cleanup(engine.Close)
			rt := NewDockerRuntime("edge-1", engine.URL)
			dc := &dockerContainer{spec: mesh.Container{Module: "host"}, state: mesh.StateStarting}
			var updates []Update
			err := rt.pullRetrying(context.Background(), dc, "10.0.0.9:5000/meshroll/host@sha256:aa", func(u Update) { updates = append(updates, u) })
			require.Equal(t, tc.attempts, attempts, "attempts")
			if tc.pulled {
				require.NoError(t, err)
				require.Len(t, updates, tc.failures, "one update per failed attempt")
				for _, u := range updates {
					require.Equal(t, mesh.StateStarting, u.State)
					require.Contains(t, u.Reason, "the registry did not answer")
					require.Contains(t, u.Reason, "; retrying in ")
				}
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), "pull 10.0.0.9:5000/meshroll/host@sha256:aa: ")
			require.Empty(t, updates, "nothing reported as retried")
		})
	}
}
