package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host/hosttest"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Composing pins the plan's build, keeps every other module as the machine
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

	res := f.composeOne(meshapi.Target{Machine: "control-node", Tier: 2, Modules: []string{"mesh-controller", "host", "metrics"}}, host7)
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

	res := f.composeOne(meshapi.Target{Machine: "control-node", Tier: 2, Modules: []string{"mesh-controller", "host"}}, host7)
	require.Len(t, res.Unknown, 1)
	require.Contains(t, res.Unknown[0], stranger.Digest)
	c, _ := res.Declaration.Container("mesh-controller")
	require.Zero(t, c.Generation, "the host's claim of generation %d is not taken", stranger.Generation)
}

// composeOne composes one target through ComposeTargets and returns its
// result, failing the test on any error.
func (f *pushFixture) composeOne(t meshapi.Target, own mesh.Build) meshapi.ComposeResult {
	f.t.Helper()
	res, err := execute[meshapi.ComposeTargetsResult](f.t, f.env, f.acts.ComposeTargets, meshapi.ComposeTargetsInput{Plan: "plan/host/x", Targets: []meshapi.Target{t}, Build: own})
	require.NoError(f.t, err)
	require.Len(f.t, res.Results, 1)
	require.Empty(f.t, res.Results[0].Error)
	return res.Results[0].ComposeResult
}

// ComposeTargets composes each target in the input's
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
	res, err := execute[meshapi.ComposeTargetsResult](t, f.env, f.acts.ComposeTargets, meshapi.ComposeTargetsInput{Plan: "plan/host/x", Targets: targets, Build: host7})
	require.NoError(t, err)
	require.Len(t, res.Results, 2)
	require.Empty(t, res.Results[0].Error)
	c, ok := res.Results[0].Declaration.Container("host")
	require.True(t, ok)
	require.Equal(t, host7.Digest, c.Digest)
	require.Equal(t, "control-node", res.Results[0].Declaration.Machine)
	require.Contains(t, res.Results[1].Error, "nowhere")
}

// A machine's env is merged over its module's when the plan's build is
// declared there (the machine's value wins), for that machine only; and
// the module's container settings are declared with it.
func TestComposeMergesMachineEnvAndDeclaresSettings(t *testing.T) {
	f := newPushFixture(t)
	f.acts.Mesh = &config.Config{
		Modules: map[string]config.Module{"host": {
			Env:     map[string]string{"ROLE": "host", "SITE": "default"},
			Volumes: []string{"data:/var/lib/host", "/etc/host:/etc/host:ro"}, Memory: "256MiB", CPUs: "0.5", User: "1000:1000", StopGrace: 3 * time.Second,
		}},
		Machines: map[string]config.Machine{
			"edge-1":       {Env: map[string]string{"SITE": "fra1", "ZONE": "b"}},
			"control-node": {},
		},
	}
	f.acts.Hosts.(fixedHosts)["edge-1"] = hosttest.New(t, "edge-1")
	host7 := bld("host", 7)
	f.record(host7)
	settings := mesh.Settings{
		Volumes:     []mesh.Mount{{Source: "data", Target: "/var/lib/host"}, {Source: "/etc/host", Target: "/etc/host", ReadOnly: true}},
		MemoryBytes: 256 << 20, NanoCPUs: 500_000_000, User: "1000:1000", StopGraceMS: 3000,
	}
	for _, tc := range []struct {
		machine string
		env     map[string]string
	}{
		{"edge-1", map[string]string{"ROLE": "host", "SITE": "fra1", "ZONE": "b"}},
		{"control-node", map[string]string{"ROLE": "host", "SITE": "default"}},
	} {
		res := f.composeOne(meshapi.Target{Machine: tc.machine, Tier: 1, Modules: []string{"host"}}, host7)
		c, ok := res.Declaration.Container("host")
		require.True(t, ok)
		require.Equal(t, tc.env, c.Env, "%s: its env over the module's", tc.machine)
		require.Equal(t, settings, c.Settings, "%s: the module's settings", tc.machine)
	}
	require.Equal(t, map[string]string{"ROLE": "host", "SITE": "default"}, f.acts.Mesh.Current().Modules["host"].Env, "the module's env is not written to")
}
