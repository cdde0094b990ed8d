package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/secret"
)

// A host that turns the worker's token away fails the push's read of its
// report in words that name the setting to fix, for the machine with no
// token and the one with a wrong one; a push retries it like a host away.
func TestReportNamesTheTokenSetting(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":"unauthorized","message":"bearer token missing or wrong"}`))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, token, says string
	}{
		{"no token", "", "machine edge-1 has no token; set MESHROLL_MACHINES_EDGE_1_TOKEN"},
		{"a wrong token", "not-it", "it refuses machine edge-1's token; set MESHROLL_MACHINES_EDGE_1_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Machines: map[string]config.Machine{"edge-1": {Host: srv.URL, Token: secret.String(tc.token)}}}
			a := &Activities{Mesh: cfg, Hosts: &config.Hosts{Mesh: cfg}, Log: zerolog.Nop()}
			_, _, err := a.report(context.Background(), "edge-1")
			require.Error(t, err)
			require.Contains(t, err.Error(), "read report of edge-1: host "+srv.URL+" answered 401 Unauthorized: "+tc.says)
			require.Contains(t, err.Error(), "(or machines.edge-1.token in the mesh config)")
		})
	}
}
