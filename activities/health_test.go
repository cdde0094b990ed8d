package activities

import (
	"strings"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// healthStep is one report the watch reads, at a time after the push sent.
type healthStep struct {
	at time.Duration
	rc mesh.RunningContainer
}

// TestHealthWatch walks the rules of healthWatch: what counts, what waits,
// what fails, for a push of one container whose probe must hold for 10 s.
func TestHealthWatch(t *testing.T) {
	web := bld("web", 3)
	probe := &mesh.Health{HTTP: &mesh.HTTPProbe{Port: mesh.PortAuto, Path: "/healthz"}, MinHealthyMS: 10_000, DeadlineMS: 60_000}
	running := func(health, since string, restarts int) mesh.RunningContainer {
		return mesh.RunningContainer{Module: "web", Digest: web.Digest, Generation: 3, State: mesh.StateRunning,
			Since: "t0", Health: health, HealthySince: since, Restarts: restarts}
	}
	failedProbe := func(rc mesh.RunningContainer) mesh.RunningContainer {
		rc.LastProbe = &mesh.ProbeResult{Status: 500, Output: "database unreachable"}
		return rc
	}
	state := func(s string) mesh.RunningContainer {
		rc := running(mesh.HealthUnhealthy, "", 0)
		rc.State = s
		return rc
	}
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }

	for _, tc := range []struct {
		name   string
		health *mesh.Health
		steps  []healthStep
		done   bool
		failed string // a substring of the failure; "" for none
	}{
		{"healthy through the window counts", probe, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "h1", 0)},
			{sec(6), running(mesh.HealthHealthy, "h1", 0)},
			{sec(11), running(mesh.HealthHealthy, "h1", 0)},
		}, true, ""},
		{"the window is timed from when this worker saw it healthy, not the host's clock", probe, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "long-ago", 0)},
			{sec(9), running(mesh.HealthHealthy, "long-ago", 0)},
		}, false, ""},
		{"failing probes before the first healthy are waited out", probe, []healthStep{
			{sec(1), failedProbe(running(mesh.HealthUnhealthy, "", 0))},
			{sec(2), running(mesh.HealthUnknown, "", 0)},
			{sec(3), running(mesh.HealthHealthy, "h1", 0)},
			{sec(13), running(mesh.HealthHealthy, "h1", 0)},
		}, true, ""},
		{"a failed probe inside the window fails, naming its output", probe, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "h1", 0)},
			{sec(4), failedProbe(running(mesh.HealthUnhealthy, "", 0))},
		}, false, "failed its http probe (GET :$MESHROLL_PORT/healthz) after 3s healthy, before 10s; last probe answered 500: database unreachable"},
		{"a probe's output of several lines is quoted on one", probe, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "h1", 0)},
			{sec(4), func() mesh.RunningContainer {
				rc := running(mesh.HealthUnhealthy, "", 0)
				rc.LastProbe = &mesh.ProbeResult{Status: 503, Output: "warming caches\n  shard 3 of 8\n"}
				return rc
			}()},
		}, false, "last probe answered 503: warming caches / shard 3 of 8"},
		{"a break between two reads (a new healthy_since) fails", probe, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "h1", 0)},
			{sec(4), running(mesh.HealthHealthy, "h2", 0)},
		}, false, "broke its healthy stretch"},
		{"a restart fails", probe, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "h1", 2)},
			{sec(4), running(mesh.HealthHealthy, "h1", 3)},
		}, false, "restarted (1 times)"},
		{"a restart before the push counts nothing against it", probe, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "h1", 2)},
			{sec(12), running(mesh.HealthHealthy, "h1", 2)},
		}, true, ""},
		{"crash-looping fails at once", probe, []healthStep{{sec(1), state(mesh.StateCrashLooping)}}, false, "is crash-looping"},
		{"the runtime's reason is said", nil, []healthStep{{sec(1), func() mesh.RunningContainer {
			rc := state(mesh.StateExited)
			rc.Reason = "exit status 1"
			return rc
		}()}}, false, "is exited (exit status 1)"},
		{"exited fails at once, naming the build as a person reads it", nil, []healthStep{{sec(1), state(mesh.StateExited)}}, false,
			"declaration 1: web generation 3 (" + mesh.ShortDigest(web.Digest) + ") is exited"},
		{"starting waits", probe, []healthStep{{sec(1), state(mesh.StateStarting)}}, false, ""},
		{"without Health, running counts at once", nil, []healthStep{{sec(1), running("", "", 0)}}, true, ""},
		{"min_healthy 0 counts at the first healthy report", &mesh.Health{MinHealthyMS: 0}, []healthStep{
			{sec(1), running(mesh.HealthHealthy, "h1", 0)},
		}, true, ""},
		{"a host that does not judge health: running is healthy, and the window holds", probe, []healthStep{
			{sec(1), running("", "", 0)},
			{sec(5), running("", "", 0)},
		}, false, ""},
		{"a host that does not judge health: a process that started again is a break", probe, []healthStep{
			{sec(1), running("", "", 0)},
			{sec(5), func() mesh.RunningContainer { rc := running("", "", 0); rc.Since = "t1"; return rc }()},
		}, false, "broke its healthy stretch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := declared(web)
			c.Health = tc.health
			w := newHealthWatch(mesh.Declaration{Machine: "edge-1", Containers: []mesh.Container{c}}, 1)
			t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
			var done bool
			var failed string
			for _, s := range tc.steps {
				s.rc.Digest = web.Digest
				done, failed = w.step(mesh.Report{Machine: "edge-1", LastSeq: 1, Containers: []mesh.RunningContainer{s.rc}}, t0.Add(s.at))
				if failed != "" {
					break
				}
			}
			if done != tc.done {
				t.Errorf("done = %v, want %v (pending: %s)", done, tc.done, w.stillPending())
			}
			switch {
			case tc.failed == "" && failed != "":
				t.Errorf("failed %q, want no failure", failed)
			case tc.failed != "" && !strings.Contains(failed, tc.failed):
				t.Errorf("failed %q, want it to contain %q", failed, tc.failed)
			}
		})
	}
}

// A declaration counts only once the host has applied it, whatever its
// containers report.
func TestHealthWatchWaitsForTheSequence(t *testing.T) {
	web := bld("web", 3)
	w := newHealthWatch(mesh.Declaration{Machine: "edge-1", Containers: []mesh.Container{declared(web)}}, 2)
	rc := running(web)
	if done, _ := w.step(mesh.Report{LastSeq: 1, Containers: []mesh.RunningContainer{rc}}, time.Now()); done {
		t.Fatal("counted before the host applied sequence 2")
	}
	if done, _ := w.step(mesh.Report{LastSeq: 2, Containers: []mesh.RunningContainer{rc}}, time.Now()); !done {
		t.Fatalf("not counted once applied: %s", w.stillPending())
	}
}

func TestHealthWatchDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		healths []*mesh.Health
		want    time.Duration
	}{
		{"no health: the running timeout", []*mesh.Health{nil}, 5 * time.Minute},
		{"the longest declared deadline", []*mesh.Health{{DeadlineMS: 30_000}, {DeadlineMS: 90_000}}, 90 * time.Second},
		{"never beyond the running timeout", []*mesh.Health{{DeadlineMS: 3_600_000}}, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d mesh.Declaration
			for _, h := range tc.healths {
				d.Containers = append(d.Containers, mesh.Container{Module: "m", Health: h})
			}
			if got := newHealthWatch(d, 1).deadline(5 * time.Minute); got != tc.want {
				t.Errorf("deadline = %s, want %s", got, tc.want)
			}
		})
	}
}

// The long poll wakes when the first running window could complete, and no
// sooner for one already complete.
func TestHealthWatchWake(t *testing.T) {
	a, b := bld("a", 1), bld("b", 1)
	ca, cb := declared(a), declared(b)
	ca.Health = &mesh.Health{MinHealthyMS: 10_000}
	cb.Health = &mesh.Health{MinHealthyMS: 3_000}
	w := newHealthWatch(mesh.Declaration{Machine: "m", Containers: []mesh.Container{ca, cb}}, 1)
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	healthy := func(c mesh.Container) mesh.RunningContainer {
		return mesh.RunningContainer{Module: c.Module, Digest: c.Digest, State: mesh.StateRunning, Health: mesh.HealthHealthy, HealthySince: "h"}
	}
	if got := w.wake(t0, 5*time.Second); got != 5*time.Second {
		t.Fatalf("before any window: wake %s, want the most, 5s", got)
	}
	w.step(mesh.Report{LastSeq: 1, Containers: []mesh.RunningContainer{healthy(ca), healthy(cb)}}, t0)
	if got := w.wake(t0.Add(time.Second), 5*time.Second); got != 2*time.Second {
		t.Errorf("wake %s, want 2s (b's window ends first)", got)
	}
	if got := w.wake(t0.Add(4*time.Second), 5*time.Second); got != 5*time.Second {
		t.Errorf("wake %s, want 5s: b's window is complete and a's ends in 6s", got)
	}
}
