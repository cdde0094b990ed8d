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
