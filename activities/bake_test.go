package activities

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

func TestBake(t *testing.T) {
	t.Run("healthy through the bake", func(t *testing.T) {
		f := newPushFixture(t)
		h1 := bld("host", 1)
		f.host.Seed(running(h1))
		res, err := execute[meshapi.BakeResult](t, f.env, f.acts.Bake, meshapi.BakeInput{Plan: "p", Tier: 1, Machines: []string{"control-node"}, Build: h1, Bake: 50 * time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, 1, res.Machines)
	})
	t.Run("turning unhealthy fails the bake, naming the machine and the probe", func(t *testing.T) {
		f := newPushFixture(t)
		h1 := bld("host", 1)
		f.host.Seed(running(h1))
		go func() {
			for f.host.Reads() < 1 {
				runtime.Gosched()
			}
			f.host.SetHealth("host", mesh.HealthUnhealthy, &mesh.ProbeResult{Status: 500, Output: "out of file descriptors"})
		}()
		_, err := f.env.ExecuteActivity(f.acts.Bake, meshapi.BakeInput{Plan: "p", Tier: 1, Machines: []string{"control-node"}, Build: h1, Bake: time.Hour})
		appErr := requireAppError(t, err, meshapi.ErrUnhealthy)
		require.Equal(t, "control-node: host turned unhealthy; last probe answered 500: out of file descriptors", appErr.Message())
	})
}

func TestBakeProblem(t *testing.T) {
	h3 := bld("host", 3)
	rc := func(mod func(*mesh.RunningContainer)) mesh.Report {
		r := running(h3)
		r.Health = mesh.HealthHealthy
		mod(&r)
		return mesh.Report{Containers: []mesh.RunningContainer{r}}
	}
	for _, tc := range []struct {
		name     string
		reports  []mesh.Report // read in turn; the last one's problem is checked
		want     string
		wantNone bool
	}{
		{"healthy", []mesh.Report{rc(func(*mesh.RunningContainer) {})}, "", true},
		{"replaced by a newer build: not ours to judge", []mesh.Report{rc(func(r *mesh.RunningContainer) {
			r.Digest, r.Generation = bld("host", 4).Digest, 4
		})}, "", true},
		{"an older build runs", []mesh.Report{rc(func(r *mesh.RunningContainer) { r.Digest, r.Generation = bld("host", 2).Digest, 2 })}, "runs host generation 2", false},
		{"gone", []mesh.Report{{}}, "no longer runs host", false},
		{"crash-looping", []mesh.Report{rc(func(r *mesh.RunningContainer) { r.State = mesh.StateCrashLooping })}, "host is crash-looping", false},
		{"restarted during the bake", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.Restarts = 1 }),
			rc(func(r *mesh.RunningContainer) { r.Restarts = 2 }),
		}, "host restarted", false},
		{"restarts before the bake do not count", []mesh.Report{rc(func(r *mesh.RunningContainer) { r.Restarts = 5 })}, "", true},
		{"healthy since the same moment through the bake", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.HealthySince = "t1" }),
			rc(func(r *mesh.RunningContainer) { r.HealthySince = "t1" }),
			rc(func(r *mesh.RunningContainer) { r.HealthySince = "t1" }),
		}, "", true},
		{"a probe that failed and passed again between two reads", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.HealthySince = "t1" }),
			rc(func(r *mesh.RunningContainer) { r.HealthySince = "t2" }),
		}, "host broke its healthy stretch: healthy since t1 when the bake began, since t2 now", false},
		{"the host agent restarted: its container started anew, its restarts counted from 0", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.HealthySince, r.Restarts = "t1", 2 }),
			rc(func(r *mesh.RunningContainer) { r.HealthySince, r.Restarts = "t2", 0 }),
		}, "host broke its healthy stretch", false},
		{"started again and not judged yet", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.HealthySince = "t1" }),
			rc(func(r *mesh.RunningContainer) { r.Health, r.HealthySince = mesh.HealthUnknown, "" }),
		}, "host is not healthy (health unknown)", false},
		{"not judged healthy at the bake's first read", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.Health, r.HealthySince = mesh.HealthUnknown, "" }),
		}, "host is not healthy (health unknown)", false},
		{"a host that does not judge health: running since the same moment", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.Health, r.Since = "", "t1" }),
			rc(func(r *mesh.RunningContainer) { r.Health, r.Since = "", "t1" }),
		}, "", true},
		{"a host that does not judge health: running since a later moment", []mesh.Report{
			rc(func(r *mesh.RunningContainer) { r.Health, r.Since = "", "t1" }),
			rc(func(r *mesh.RunningContainer) { r.Health, r.Since = "", "t2" }),
		}, "host broke its healthy stretch", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			baseline := map[string]bakeBaseline{}
			var got string
			for _, rep := range tc.reports {
				got = bakeProblem(rep, h3, baseline, "edge-1")
			}
			if tc.wantNone {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.want)
		})
	}
}
