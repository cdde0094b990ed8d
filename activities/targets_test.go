package activities

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// A plan the worker's config cannot give targets is refused in Targets'
// result, not by failing it, so that the plan's notify targets hear why:
// only those that want the module.
func TestTargetsRefusesInItsResult(t *testing.T) {
	cfg := config.Default()
	cfg.Modules["host"] = config.Module{Repo: "."}
	cfg.Machines["edge-1"] = config.Machine{Tier: 1, Modules: []string{"host"}}
	cfg.Notify.Targets = map[string]config.NotifyTarget{"team": {Modules: []string{"ghost"}}}
	a := &Activities{Mesh: cfg, Log: zerolog.Nop()}
	for _, tc := range []struct {
		name   string
		in     meshapi.TargetsInput
		want   string
		notify bool
	}{
		{"unknown module a target wants", meshapi.TargetsInput{Module: "ghost"}, `"ghost"`, true},
		{"unknown module nobody wants", meshapi.TargetsInput{Module: "other"}, `"other"`, false},
		{"a sync that would remove a machine running it", meshapi.TargetsInput{Module: "host", Remove: "edge-1"}, "a sync brings it up, it does not stop it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := a.Targets(context.Background(), tc.in)
			require.NoError(t, err)
			require.Contains(t, res.Refused, tc.want)
			require.Empty(t, res.Targets)
			require.Equal(t, tc.notify, res.Notify)
		})
	}
}
