package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// ComposeTargets composes each target as Compose does, in the input's
// order, and names a target it cannot compose (a machine the worker does
// not know) without failing the others.
func TestComposeTargetsNamesWhatItCannotCompose(t *testing.T) {
	f := newPushFixture(t)
	f.acts.Mesh = &config.Config{Modules: map[string]config.Module{"host": {}}}
	host7 := bld("host", 7)
	f.record(host7)

	targets := []meshapi.Target{
		{Machine: "control-node", Tier: 1, Modules: []string{"host"}},
		{Machine: "nowhere", Tier: 1, Modules: []string{"host"}},
	}
	v, err := f.env.ExecuteActivity(f.acts.ComposeTargets, meshapi.ComposeTargetsInput{Plan: "plan/host/x", Targets: targets, Build: host7})
	require.NoError(t, err)
	var res meshapi.ComposeTargetsResult
	require.NoError(t, v.Get(&res))
	require.Len(t, res.Results, 2)
	require.Empty(t, res.Results[0].Error)
	c, ok := res.Results[0].Declaration.Container("host")
	require.True(t, ok)
	require.Equal(t, host7.Digest, c.Digest)
	require.Equal(t, "control-node", res.Results[0].Declaration.Machine)
	require.Contains(t, res.Results[1].Error, "nowhere")
}
