package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Compose pins the plan's build, keeps every other module as the machine
// runs it, and gives a module the machine lacks its newest build that has
// converged somewhere (never one that has not).
func TestComposeKeepsOthersAndFillsMissingWithNewestConverged(t *testing.T) {
	f := newPushFixture(t)
	f.acts.Mesh = &config.Config{Modules: map[string]config.Module{
		"host":            {Env: map[string]string{"ROLE": "host"}},
		"mesh-controller": {},
		"metrics":         {},
	}}
	ctx := context.Background()
	host6, host7 := bld("host", 6), bld("host", 7)
	ctl11 := bld("mesh-controller", 11)
	met2, met3 := bld("metrics", 2), bld("metrics", 3)
	f.record(host6, host7, ctl11, met2, met3)
	require.NoError(t, f.cat.MarkConverged(ctx, met2.Digest, "edge-9"))
	f.host.Seed(running(host6), running(ctl11))

	v, err := f.env.ExecuteActivity(f.acts.Compose, meshapi.ComposeInput{
		Plan:   "plan/host/x",
		Target: meshapi.Target{Machine: "control-node", Tier: 2, Modules: []string{"mesh-controller", "host", "metrics"}},
		Build:  host7,
	})
	require.NoError(t, err)
	var res meshapi.ComposeResult
	require.NoError(t, v.Get(&res))
	d := res.Declaration
	want := map[string]string{"mesh-controller": ctl11.Digest, "host": host7.Digest, "metrics": met2.Digest}
	require.Len(t, d.Containers, len(want))
	for m, dg := range want {
		c, ok := d.Container(m)
		require.True(t, ok, "declaration has %s", m)
		require.Equal(t, dg, c.Digest, "%s", m)
	}
	h, _ := d.Container("host")
	require.Equal(t, map[string]string{"ROLE": "host"}, h.Env, "the plan's module gets its configured settings")
	require.Equal(t, []string{"mesh-controller", "host", "metrics"}, modules(d), "in the machine's configured order")
}

func modules(d mesh.Declaration) []string {
	var ms []string
	for _, c := range d.Containers {
		ms = append(ms, c.Module)
	}
	return ms
}

// A running digest the catalogue does not know is named, not guessed: its
// container carries no generation of the host's choosing.
func TestComposeNamesUnknownRunningDigests(t *testing.T) {
	f := newPushFixture(t)
	f.acts.Mesh = &config.Config{Modules: map[string]config.Module{"host": {}, "mesh-controller": {}}}
	host7 := bld("host", 7)
	f.record(host7)
	stranger := running(bld("mesh-controller", 99)) // never recorded
	f.host.Seed(stranger)

	v, err := f.env.ExecuteActivity(f.acts.Compose, meshapi.ComposeInput{
		Plan:   "plan/host/x",
		Target: meshapi.Target{Machine: "control-node", Tier: 2, Modules: []string{"mesh-controller", "host"}},
		Build:  host7,
	})
	require.NoError(t, err)
	var res meshapi.ComposeResult
	require.NoError(t, v.Get(&res))
	require.Len(t, res.Unknown, 1)
	require.Contains(t, res.Unknown[0], stranger.Digest)
	c, _ := res.Declaration.Container("mesh-controller")
	require.Zero(t, c.Generation, "the host's claim of generation %d is not taken", stranger.Generation)
}
