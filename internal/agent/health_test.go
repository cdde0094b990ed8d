package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// fakeClock is a clock that moves only when a test advances it, so that
// probe intervals and min_healthy pass without sleeping.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced when a timer is added
}

type fakeTimer struct {
	at      time.Time
	ch      chan time.Time // After
	f       func()         // AfterFunc
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Now(), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(t *fakeTimer, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.at = c.now.Add(d)
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	t := &fakeTimer{ch: make(chan time.Time, 1)}
	c.add(t, d)
	return t.ch
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	t := &fakeTimer{f: f}
	c.add(t, d)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock on by d and fires what came due, AfterFuncs in
// this goroutine, so that what they do is done when Advance returns.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, left []*fakeTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			left = append(left, t)
		}
	}
	c.timers = left
	now := c.now
	c.mu.Unlock()
	for _, t := range due {
		if t.f != nil {
			t.f()
		} else {
			t.ch <- now
		}
	}
}

// waitAfters waits until n Afters (a prober waiting for its interval) are
// pending, so that an Advance reaches them.
func (c *fakeClock) waitAfters(t *testing.T, n int) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		pending := 0
		for _, tm := range c.timers {
			if tm.ch != nil && !tm.stopped {
				pending++
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if pending >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d probers never waited on the clock (%d do)", n, pending)
		}
	}
}

// waitReport long-polls w until ok accepts its report, which it returns:
// every change of the report wakes it, so nothing is missed and nothing
// sleeps.
func waitReport(t *testing.T, w host.ReportWaiter, what string, ok func(mesh.Report) bool) mesh.Report {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	var rev uint64
	for {
		left := time.Until(deadline)
		rep, r, err := w.WaitReport(context.Background(), rev, left)
		require.NoError(t, err)
		if ok(rep) {
			return rep
		}
		if left <= 0 {
			t.Fatalf("never: %s; report: %+v", what, rep)
		}
		rev = r
	}
}

// waitContainer waits until module's line in the report satisfies ok.
func waitContainer(t *testing.T, w host.ReportWaiter, module, what string, ok func(mesh.RunningContainer) bool) mesh.RunningContainer {
	t.Helper()
	rep := waitReport(t, w, module+" "+what, func(rep mesh.Report) bool {
		rc, found := rep.Running(module)
		return found && ok(rc)
	})
	rc, _ := rep.Running(module)
	return rc
}

func healthIs(h string) func(mesh.RunningContainer) bool {
	return func(rc mesh.RunningContainer) bool { return rc.Health == h }
}

func checked(c mesh.Container, h mesh.Health) mesh.Container {
	c.Health = &h
	return c
}

// TestHealthNilAsBefore: a container declared without a check (Health
// nil) is healthy as soon as it runs, since it runs, and raises its floor
// then, journalled as running.
func TestHealthNilAsBefore(t *testing.T) {
	h := newHarness(t, t.TempDir(), held)
	h.mustApply(decl(1, ctr("web", 5)))
	rc, _ := h.report().Running("web")
	assert.Equal(t, mesh.HealthUnknown, rc.Health, "not judged while starting")
	assert.Empty(t, rc.HealthySince)
	assert.Nil(t, rc.Check)

	h.run("web")
	rc, _ = h.report().Running("web")
	assert.Equal(t, mesh.HealthHealthy, rc.Health)
	assert.Equal(t, rc.Since, rc.HealthySince, "healthy since it runs")
	assert.Nil(t, rc.LastProbe, "no probe runs")
	f, ok := h.floor("web")
	require.True(t, ok, "the floor rises when it runs")
	assert.Equal(t, int64(5), f.Generation)
	assert.Equal(t, []string{"running 1", "applied 1"}, outcomes(h.journal()))
}

// TestFloorAfterMinHealthy: with a check the floor rises only once the
// container has been healthy for min_healthy, and at once when that is 0;
// the clock is the test's, so the wait is exact.
func TestFloorAfterMinHealthy(t *testing.T) {
	interval := time.Second
	cases := []struct {
		name  string
		check mesh.Health
		// probed: healthy only after a probe; otherwise once running.
		probed bool
	}{
		{"http probe", mesh.Health{HTTP: &mesh.HTTPProbe{Path: "/healthz"}, IntervalMS: 1000, MinHealthyMS: 10_000}, true},
		{"http probe, min_healthy 0", mesh.Health{HTTP: &mesh.HTTPProbe{}, IntervalMS: 1000}, true},
		{"exec probe", mesh.Health{Exec: []string{"check"}, IntervalMS: 1000, MinHealthyMS: 3000}, true},
		{"no probe", mesh.Health{MinHealthyMS: 10_000}, false},
		{"no probe, min_healthy 0", mesh.Health{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			h := newHarness(t, t.TempDir(), withClock(clk))
			web := checked(ctr("web", 7), tc.check)
			h.mustApply(decl(1, web))
			h.waitState("web", mesh.StateRunning)
			if tc.probed {
				rc, _ := h.report().Running("web")
				assert.Equal(t, mesh.HealthUnknown, rc.Health, "not judged before its first probe")
				clk.waitAfters(t, 1)
				clk.Advance(interval)
			}
			rc := waitContainer(t, h.a, "web", "healthy", healthIs(mesh.HealthHealthy))
			assert.NotEmpty(t, rc.HealthySince)
			assert.Equal(t, web, rc.Declared(), "the check is reported as declared, so a push can keep it")
			if tc.probed {
				require.NotNil(t, rc.LastProbe)
				assert.True(t, rc.LastProbe.OK)
				assert.Equal(t, rc.HealthySince, rc.LastProbe.At)
				assert.Contains(t, rc.LastProbe.Output, "runtime noop runs nothing")
			}

			minHealthy := tc.check.MinHealthy()
			if minHealthy > 0 {
				_, ok := h.floor("web")
				assert.False(t, ok, "no floor before min_healthy")
				clk.Advance(minHealthy - time.Millisecond)
				_, ok = h.floor("web")
				assert.False(t, ok, "no floor a millisecond before min_healthy")
				clk.Advance(time.Millisecond)
			}
			f, ok := h.floor("web")
			require.True(t, ok, "the floor rises once healthy for min_healthy")
			assert.Equal(t, int64(7), f.Generation)

			want := []string{"floor-raised 1", "running 1", "applied 1"}
			if tc.probed {
				want = []string{"floor-raised 1", "healthy 1", "running 1", "applied 1"}
			}
			assert.Equal(t, want, outcomes(h.journal()))

			// A restarted agent finds the floor in its journal.
			h.restart()
			f, ok = h.floor("web")
			require.True(t, ok)
			assert.Equal(t, int64(7), f.Generation)
		})
	}
}

// TestSameProbeOutcomeKeepsRevision: a probe that only repeats the last
// one's outcome refreshes last_probe without waking long polls.
func TestSameProbeOutcomeKeepsRevision(t *testing.T) {
	clk := newFakeClock()
	h := newHarness(t, t.TempDir(), withClock(clk))
	h.mustApply(decl(1, checked(ctr("web", 1), mesh.Health{TCP: &mesh.TCPProbe{Port: 9}, IntervalMS: 1000})))
	h.waitState("web", mesh.StateRunning)
	clk.waitAfters(t, 1)
	clk.Advance(time.Second)
	rc := waitContainer(t, h.a, "web", "healthy", healthIs(mesh.HealthHealthy))
	_, rev, err := h.a.WaitReport(context.Background(), 0, 0)
	require.NoError(t, err)

	first := rc.LastProbe.At
	clk.waitAfters(t, 1)
	clk.Advance(time.Second)
	// The prober waits again once it took the second result in.
	clk.waitAfters(t, 1)
	h.a.mu.Lock()
	second := h.a.containerLocked("web").LastProbe.At
	h.a.mu.Unlock()
	assert.NotEqual(t, first, second, "the second probe ran")
	_, again, err := h.a.WaitReport(context.Background(), 0, 0)
	require.NoError(t, err)
	assert.Equal(t, rev, again)
}

// TestLongPoll: the report answers at once without after or with a stale
// one, waits for a change, and answers at the end of its wait without one,
// all over the wire; an old client without the parameters is answered at
// once, as before.
func TestLongPoll(t *testing.T) {
	h := newHarness(t, t.TempDir(), held)
	ctx := context.Background()
	rep, rev, err := h.c.WaitReport(ctx, 0, 0)
	require.NoError(t, err)
	require.NotZero(t, rev, "the agent names its report's revision")
	assert.Zero(t, rep.LastSeq)

	t.Run("stale revision answers at once", func(t *testing.T) {
		start := time.Now()
		_, got, err := h.c.WaitReport(ctx, rev-1, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, rev, got)
		assert.Less(t, time.Since(start), 30*time.Second)
	})
	t.Run("times out without a change", func(t *testing.T) {
		start := time.Now()
		_, got, err := h.c.WaitReport(ctx, rev, 150*time.Millisecond)
		require.NoError(t, err)
		assert.Equal(t, rev, got, "nothing changed")
		assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	})
	t.Run("returns on a change", func(t *testing.T) {
		type answer struct {
			rep mesh.Report
			rev uint64
			err error
		}
		answered := make(chan answer, 1)
		go func() {
			rep, rev, err := h.c.WaitReport(ctx, rev, time.Minute)
			answered <- answer{rep, rev, err}
		}()
		h.mustApply(decl(1, ctr("web", 1)))
		select {
		case a := <-answered:
			require.NoError(t, a.err)
			assert.NotEqual(t, rev, a.rev)
			assert.Equal(t, uint64(1), a.rep.LastSeq, "the answer shows the change")
		case <-time.After(waitLimit):
			t.Fatal("the long poll did not return on the change")
		}
	})
	t.Run("outlasts the server's write timeout", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(NewHandler(h.a, ""))
		srv.Config.WriteTimeout = 50 * time.Millisecond
		srv.Start()
		defer srv.Close()
		c, err := host.NewHTTPClient(srv.URL, "", nil)
		require.NoError(t, err)
		_, cur, err := c.WaitReport(ctx, 0, 0)
		require.NoError(t, err)
		_, got, err := c.WaitReport(ctx, cur, 200*time.Millisecond)
		require.NoError(t, err, "the long poll extends its own write deadline")
		assert.Equal(t, cur, got)
	})
	t.Run("old client", func(t *testing.T) {
		resp, err := http.Get(h.srv.URL + host.PathReport)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.NotEmpty(t, resp.Header.Get(host.HeaderReportRevision))
	})
	t.Run("bad parameters", func(t *testing.T) {
		for _, q := range []string{"?wait=-1s", "?wait=soon", "?after=x", "?after=-1", "?colour=red", "?wait=1s&wait=2s"} {
			resp, err := http.Get(h.srv.URL + host.PathReport + q)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		}
	})
	t.Run("closing wakes waiters", func(t *testing.T) {
		h2 := newHarness(t, t.TempDir())
		_, rev, err := h2.a.WaitReport(ctx, 0, 0)
		require.NoError(t, err)
		done := make(chan error, 1)
		a := h2.a // close clears the field the goroutine would read
		go func() {
			_, _, err := a.WaitReport(ctx, rev, time.Minute)
			done <- err
		}()
		h2.close()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrClosed)
		case <-time.After(waitLimit):
			t.Fatal("a waiter outlived Close")
		}
	})
}

// TestExecProbeNeedsExecer: a runtime that cannot run commands fails an
// exec probe, saying so, rather than passing it.
func TestExecProbeNeedsExecer(t *testing.T) {
	a := &Agent{rt: failingRuntime{}, clock: realClock{}}
	res := a.probeOnce(context.Background(), checked(ctr("web", 1), mesh.Health{Exec: []string{"true"}}))
	assert.False(t, res.OK)
	assert.Equal(t, "runtime failing cannot run exec probes", res.Output)
	assert.Nil(t, res.ExitCode)
}

func TestBrief(t *testing.T) {
	long := strings.Repeat("é", MaxProbeOutput) // two bytes each
	for _, tc := range []struct{ in, want string }{
		{"ok", "ok"},
		{"bad \xff byte", "bad  byte"},
		{long, long[:MaxProbeOutput]},
		{"x" + long, "x" + long[:MaxProbeOutput-2]},
	} {
		got := brief(tc.in)
		assert.Equal(t, tc.want, got)
		assert.LessOrEqual(t, len(got), MaxProbeOutput)
	}
}

func TestResolved(t *testing.T) {
	c := checked(ctr("web", 1), mesh.Health{HTTP: &mesh.HTTPProbe{Path: "/h"}})
	c.Env = map[string]string{mesh.EnvPort: "1", "A": "b"}
	r := resolved(c, 4321)
	assert.Equal(t, map[string]string{mesh.EnvPort: "4321", "A": "b"}, r.Env, "the picked port wins")
	assert.Equal(t, 4321, r.Health.HTTP.Port)
	assert.Equal(t, mesh.PortAuto, c.Health.HTTP.Port, "the declared container is untouched")
	assert.Equal(t, "1", c.Env[mesh.EnvPort])

	fixed := checked(ctr("web", 1), mesh.Health{TCP: &mesh.TCPProbe{Port: 80}})
	assert.Equal(t, fixed, resolved(fixed, 0), "a fixed port is the container's own")
}

// TestReplayRaisesFloorAsJournalled: replaying the journal past the
// checkpoint raises the floor where the agent raised it: at running for a
// container without a check (and every container of a journal from before
// health), at floor-raised for one with.
func TestReplayRaisesFloorAsJournalled(t *testing.T) {
	withCheck := checked(ctr("web", 7), mesh.Health{MinHealthyMS: 1000})
	cases := []struct {
		name  string
		entry Entry
		floor bool
	}{
		{"running, no check", Entry{Outcome: OutcomeRunning, Containers: []mesh.Container{ctr("web", 7)}}, true},
		{"running, with a check", Entry{Outcome: OutcomeRunning, Containers: []mesh.Container{withCheck}}, false},
		{"healthy", Entry{Outcome: OutcomeHealthy, Containers: []mesh.Container{withCheck}}, false},
		{"floor raised", Entry{Outcome: OutcomeFloorRaised, Containers: []mesh.Container{withCheck}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{ledger: host.Ledger{Machine: testMachine}}
			a.replayLocked(tc.entry)
			f, ok := a.ledger.Floor["web"]
			assert.Equal(t, tc.floor, ok)
			if ok {
				assert.Equal(t, int64(7), f.Generation)
			}
		})
	}
}

// confirmingRuntime is a noop runtime that reports by looking, as docker's
// does: whether a container ran unbroken is its answer, set by the test.
type confirmingRuntime struct {
	*NoopRuntime
	unbroken atomic.Bool
}

func (r *confirmingRuntime) Unbroken(context.Context, string, int) (bool, error) {
	return r.unbroken.Load(), nil
}

// A container healthy for min_healthy by the runtime's last report does
// not count (no floor) when the runtime, asked at that moment, says it
// crashed and was restarted since; the report of the restart, seen only by
// its count, starts its healthy time anew, and it counts min_healthy after
// that.
func TestFloorWaitsForARuntimeThatLooksToConfirm(t *testing.T) {
	clk := newFakeClock()
	rt := &confirmingRuntime{NoopRuntime: NewNoopRuntime(0)}
	a, err := Open(context.Background(), Options{
		Machine: testMachine, StateDir: t.TempDir(), Runtime: rt, Log: zerolog.Nop(), clock: clk,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })

	_, err = a.Apply(context.Background(), decl(1, checked(ctr("web", 1), mesh.Health{MinHealthyMS: 3000})))
	require.NoError(t, err)
	first := waitContainer(t, a, "web", "healthy", healthIs(mesh.HealthHealthy))
	clk.Advance(3 * time.Second)
	_, raised := floorOf(a, "web")
	require.False(t, raised, "no floor for a container the runtime says restarted")

	rt.unbroken.Store(true)
	a.mu.Lock()
	epoch := a.epoch
	a.mu.Unlock()
	a.updater(epoch)(Update{Module: "web", State: mesh.StateRunning, Since: clk.Now().Add(time.Second), Restarts: 1})
	again := waitContainer(t, a, "web", "healthy again, since the restart", func(rc mesh.RunningContainer) bool {
		return rc.Health == mesh.HealthHealthy && rc.HealthySince != first.HealthySince
	})
	assert.Equal(t, 1, again.Restarts)
	clk.Advance(3 * time.Second)
	_, raised = floorOf(a, "web")
	require.True(t, raised, "min_healthy after the restart, confirmed: the floor rises")
}
