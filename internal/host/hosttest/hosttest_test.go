package hosttest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/host/hosttest"
	"github.com/meshroll/meshroll/internal/mesh"
)

func dig(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func ctr(module string, c byte, gen int64) mesh.Container {
	return mesh.Container{Module: module, Digest: dig(c), Generation: gen}
}

func decl(seq uint64, cs ...mesh.Container) mesh.Declaration {
	return mesh.Declaration{Machine: "m1", Seq: seq, Plan: "plan/x", Request: "req-" + string(rune('0'+seq%10)), Containers: cs}
}

func apply(t *testing.T, h *hosttest.Host, d mesh.Declaration) (host.ApplyResult, error) {
	t.Helper()
	return h.Client().Apply(context.Background(), d)
}

func requireRefused(t *testing.T, err error, code string) *host.RefusedError {
	t.Helper()
	r, ok := host.IsRefused(err)
	require.True(t, ok, "want refusal %s, got %v", code, err)
	require.Equal(t, code, r.Code, r.Error())
	return r
}

func report(t *testing.T, h *hosttest.Host) mesh.Report {
	t.Helper()
	rep, err := h.Client().Report(context.Background())
	require.NoError(t, err)
	return rep
}

func states(rep mesh.Report) map[string]string {
	m := map[string]string{}
	for _, c := range rep.Containers {
		m[c.Module] = c.State
	}
	return m
}

func TestApplyUpdatesReport(t *testing.T) {
	h := hosttest.New(t, "m1")
	h.Seed(mesh.RunningContainer{Module: "old", Digest: dig('0'), Generation: 1})
	rep := report(t, h)
	assert.Equal(t, "m1", rep.Machine)
	assert.Zero(t, rep.LastSeq)
	assert.Equal(t, map[string]string{"old": mesh.StateRunning}, states(rep))

	d := decl(1, ctr("web", 'b', 2), ctr("api", 'a', 3))
	res, err := apply(t, h, d)
	require.NoError(t, err)
	assert.Equal(t, host.ApplyResult{Seq: 1}, res)

	rep = report(t, h)
	assert.Equal(t, uint64(1), rep.LastSeq)
	assert.Equal(t, d.Request, rep.LastRequest)
	require.Len(t, rep.Containers, 2, "undeclared modules are removed")
	api, ok := rep.Running("api")
	require.True(t, ok)
	assert.Equal(t, mesh.RunningContainer{
		Module: "api", Digest: dig('a'), Generation: 3, Plan: "plan/x", Seq: 1,
		State: mesh.StateRunning, Since: api.Since, Introduced: &mesh.Introduction{Plan: "plan/x", Seq: 1},
		Health: mesh.HealthHealthy, HealthySince: api.Since,
	}, api)
	assert.NotEmpty(t, api.Since)
	assert.Equal(t, rep, h.Report())
	assert.Equal(t, []mesh.Declaration{d}, h.Applied())
	assert.Equal(t, []mesh.Declaration{d}, h.Received())

	// An unchanged container keeps running under the next declaration; its
	// Plan and Seq follow the declaration.
	h.HoldStart(true)
	_, err = apply(t, h, decl(2, ctr("api", 'a', 3), ctr("web", 'c', 4)))
	require.NoError(t, err)
	rep = h.Report()
	assert.Equal(t, map[string]string{"api": mesh.StateRunning, "web": mesh.StateStarting}, states(rep))
	api2, _ := rep.Running("api")
	assert.Equal(t, uint64(2), api2.Seq)
	assert.Equal(t, api.Since, api2.Since)
	assert.Equal(t, &mesh.Introduction{Plan: "plan/x", Seq: 1}, api2.Introduced, "kept, so still introduced by the first")
	web, _ := rep.Running("web")
	assert.Equal(t, uint64(2), web.Introduced.Seq)
	h.HoldStart(false)
	assert.Equal(t, map[string]string{"api": mesh.StateRunning, "web": mesh.StateRunning}, states(h.Report()))
}

func TestSequenceRefused(t *testing.T) {
	h := hosttest.New(t, "m1")
	_, err := apply(t, h, decl(0, ctr("api", 'a', 1)))
	r := requireRefused(t, err, host.CodeSequence)
	assert.Zero(t, r.LastSeq)

	_, err = apply(t, h, decl(5, ctr("api", 'a', 1)))
	require.NoError(t, err)
	for _, seq := range []uint64{1, 4} {
		_, err = apply(t, h, decl(seq, ctr("api", 'a', 1)))
		r = requireRefused(t, err, host.CodeSequence)
		assert.Equal(t, uint64(5), r.LastSeq)
		assert.Equal(t, http.StatusConflict, r.Status)
		assert.Contains(t, err.Error(), "(last applied 5)")
	}
	// Same Seq, different content: not a repeat.
	_, err = apply(t, h, decl(5, ctr("api", 'a', 2)))
	requireRefused(t, err, host.CodeSequence)

	assert.Len(t, h.Applied(), 1)
	assert.Len(t, h.Received(), 5)
	assert.Equal(t, uint64(5), h.Report().LastSeq)
}

func TestExactRepeatIsAcceptedAndAppliesNothing(t *testing.T) {
	h := hosttest.New(t, "m1")
	first := decl(1, ctr("api", 'a', 1))
	_, err := apply(t, h, first)
	require.NoError(t, err)
	last := decl(2, ctr("api", 'a', 2), ctr("web", 'b', 1))
	last.Containers[0].Env = map[string]string{"A": "1"}
	_, err = apply(t, h, last)
	require.NoError(t, err)

	// Same content with containers reordered is still the same declaration.
	again := host.CloneDeclaration(last)
	again.Containers[0], again.Containers[1] = again.Containers[1], again.Containers[0]
	res, err := apply(t, h, again)
	require.NoError(t, err)
	assert.Equal(t, host.ApplyResult{Seq: 2, Repeat: true}, res)
	assert.Len(t, h.Applied(), 2, "a repeat applies nothing")
	assert.Len(t, h.Received(), 3)

	// Only the last applied declaration may be repeated.
	_, err = apply(t, h, first)
	requireRefused(t, err, host.CodeSequence)
	assert.Len(t, h.Applied(), 2)
}

func TestRepeatDoesNotRestart(t *testing.T) {
	h := hosttest.New(t, "m1", hosttest.WithStartAfterReports(1))
	d := decl(1, ctr("api", 'a', 1))
	_, err := apply(t, h, d)
	require.NoError(t, err)
	assert.Equal(t, mesh.StateStarting, states(report(t, h))["api"])
	assert.Equal(t, mesh.StateRunning, states(report(t, h))["api"])
	res, err := apply(t, h, d)
	require.NoError(t, err)
	assert.True(t, res.Repeat)
	assert.Equal(t, mesh.StateRunning, states(report(t, h))["api"])
}

func TestWrongMachineInvalid(t *testing.T) {
	h := hosttest.New(t, "m1")
	d := decl(1, ctr("api", 'a', 1))
	d.Machine = "m2"
	_, err := apply(t, h, d)
	r := requireRefused(t, err, host.CodeInvalid)
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Contains(t, r.Message, `"m2"`)

	_, err = apply(t, h, decl(1, ctr("api", 'a', 1), ctr("api", 'b', 2)))
	requireRefused(t, err, host.CodeInvalid)
	_, err = apply(t, h, decl(1, ctr("Bad/Name", 'a', 1)))
	requireRefused(t, err, host.CodeInvalid)
	assert.Empty(t, h.Applied())
	assert.Zero(t, h.Report().LastSeq)
}

func TestUnknownFieldsInvalid(t *testing.T) {
	h := hosttest.New(t, "m1")
	resp, err := http.Post(h.URL()+host.PathDeclarations, "application/json",
		strings.NewReader(`{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[],"colour":"red"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Empty(t, h.Received(), "an undecodable body is no declaration")
}

func TestUnpinnedRefused(t *testing.T) {
	h := hosttest.New(t, "m1")
	for _, c := range []mesh.Container{
		{Module: "api", Digest: "latest", Generation: 1},
		{Module: "api", Digest: "", Generation: 1},
		{Module: "api", Digest: "sha256:" + strings.Repeat("A", 64), Generation: 1},
		{Module: "api", Digest: dig('a'), Image: "reg:5000/api:latest", Generation: 1},
		{Module: "api", Digest: dig('a'), Image: "reg/api@" + dig('a'), Generation: 1},
	} {
		d := decl(1, c)
		d.Force = true // force does not pass an unpinned image
		_, err := apply(t, h, d)
		r := requireRefused(t, err, host.CodeUnpinned)
		assert.Equal(t, http.StatusBadRequest, r.Status)
	}
	_, err := apply(t, h, decl(1, mesh.Container{Module: "api", Digest: dig('a'), Image: "127.0.0.1:5000/meshroll/api", Generation: 1}))
	require.NoError(t, err)
}

func TestDowngradeRefusedUnlessForced(t *testing.T) {
	h := hosttest.New(t, "m1")
	h.Seed(mesh.RunningContainer{Module: "api", Digest: dig('7'), Generation: 7})

	_, err := apply(t, h, decl(1, ctr("api", '5', 5), ctr("web", 'b', 1)))
	r := requireRefused(t, err, host.CodeDowngrade)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, fmt.Sprintf("module api: generation 5 (%s) is below generation 7 (%s), which has run here; set force to go below the floor",
		mesh.ShortDigest(dig('5')), mesh.ShortDigest(dig('7'))), r.Message, "both builds, as a person reads them")
	assert.Empty(t, h.Applied())

	_, err = apply(t, h, decl(1, ctr("api", 'c', 7)))
	require.NoError(t, err, "the same generation is no downgrade")

	forced := decl(2, ctr("api", '5', 5))
	forced.Force = true
	_, err = apply(t, h, forced)
	require.NoError(t, err)
	assert.Equal(t, dig('5'), h.Report().Containers[0].Digest)

	// Once the forced container runs, the operator's decision stands: the
	// next unforced push at that generation passes.
	f, _ := h.Floor("api")
	assert.Equal(t, host.Mark{Digest: dig('5'), Generation: 5}, f)
	_, err = apply(t, h, decl(3, ctr("api", '5', 5), ctr("web", 'b', 1)))
	require.NoError(t, err)
}

func TestFloorRisesOnlyWhenRunning(t *testing.T) {
	h := hosttest.New(t, "m1")
	h.Seed(mesh.RunningContainer{Module: "api", Digest: dig('7'), Generation: 7})

	h.HoldStart(true)
	_, err := apply(t, h, decl(1, ctr("api", '9', 9)))
	require.NoError(t, err)
	assert.Equal(t, mesh.StateStarting, states(report(t, h))["api"])
	f, _ := h.Floor("api")
	assert.Equal(t, int64(7), f.Generation)

	// Generation 9 is not running yet: 8 is above the floor.
	_, err = apply(t, h, decl(2, ctr("api", '8', 8)))
	require.NoError(t, err)
	// 6 is below the floor 7 held by the seeded container that ran.
	_, err = apply(t, h, decl(3, ctr("api", '6', 6)))
	requireRefused(t, err, host.CodeDowngrade)

	h.HoldStart(false)
	assert.Equal(t, mesh.StateRunning, states(report(t, h))["api"])
	_, err = apply(t, h, decl(3, ctr("api", '7', 7)))
	requireRefused(t, err, host.CodeDowngrade)
	_, err = apply(t, h, decl(3, ctr("api", '8', 8)))
	require.NoError(t, err)
}

func TestCrashLoopingBuildCanBeRolledBack(t *testing.T) {
	h := hosttest.New(t, "m1")
	h.Seed(mesh.RunningContainer{Module: "api", Digest: dig('7'), Generation: 7})
	h.SetCrash("api", true)
	_, err := apply(t, h, decl(1, ctr("api", '9', 9)))
	require.NoError(t, err)
	assert.Equal(t, mesh.StateCrashLooping, states(report(t, h))["api"])

	h.SetCrash("api", false)
	_, err = apply(t, h, decl(2, ctr("api", '7', 7)))
	require.NoError(t, err, "a build that never ran raises no floor")
	assert.Equal(t, mesh.StateRunning, states(report(t, h))["api"])
}

func TestSetCrashAffectsOnlyNewStarts(t *testing.T) {
	h := hosttest.New(t, "m1")
	h.Seed(mesh.RunningContainer{Module: "api", Digest: dig('7'), Generation: 7})
	h.SetCrash("api", true)
	assert.Equal(t, mesh.StateRunning, states(h.Report())["api"], "what runs keeps running")
	_, err := apply(t, h, decl(1, ctr("api", '9', 9)))
	require.NoError(t, err)
	assert.Equal(t, mesh.StateCrashLooping, states(h.Report())["api"])

	h.SetCrash("api", false)
	assert.Equal(t, mesh.StateCrashLooping, states(h.Report())["api"], "clearing does not revive it")
	f, _ := h.Floor("api")
	assert.Equal(t, int64(7), f.Generation)
}

func TestFloorOutlivesRemoval(t *testing.T) {
	h := hosttest.New(t, "m1")
	_, err := apply(t, h, decl(1, ctr("api", '9', 9)))
	require.NoError(t, err)
	_, err = apply(t, h, decl(2))
	require.NoError(t, err)
	assert.Empty(t, h.Report().Containers)
	_, err = apply(t, h, decl(3, ctr("api", '8', 8)))
	requireRefused(t, err, host.CodeDowngrade)
}

func TestStartAfterReports(t *testing.T) {
	h := hosttest.New(t, "m1", hosttest.WithStartAfterReports(2))
	_, err := apply(t, h, decl(1, ctr("api", 'a', 1)))
	require.NoError(t, err)
	assert.Equal(t, mesh.StateStarting, h.Report().Containers[0].State, "inspection does not count as a read")
	assert.Equal(t, mesh.StateStarting, states(report(t, h))["api"])
	assert.Equal(t, mesh.StateStarting, states(report(t, h))["api"])
	assert.Equal(t, mesh.StateRunning, states(report(t, h))["api"])
}

func TestStartAfterReportsWithHoldAndCrash(t *testing.T) {
	h := hosttest.New(t, "m1", hosttest.WithStartAfterReports(1))
	h.HoldStart(true)
	h.SetCrash("web", true)
	_, err := apply(t, h, decl(1, ctr("api", 'a', 1), ctr("web", 'b', 1)))
	require.NoError(t, err)
	for range 3 {
		assert.Equal(t, map[string]string{"api": mesh.StateStarting, "web": mesh.StateStarting}, states(report(t, h)))
	}
	h.HoldStart(false)
	assert.Equal(t, map[string]string{"api": mesh.StateRunning, "web": mesh.StateCrashLooping}, states(report(t, h)))
}

func TestDown(t *testing.T) {
	h := hosttest.New(t, "m1")
	h.SetDown(true)
	_, err := h.Client().Report(context.Background())
	assert.True(t, host.IsUnreachable(err), "%v", err)
	_, err = apply(t, h, decl(1, ctr("api", 'a', 1)))
	assert.True(t, host.IsUnreachable(err), "%v", err)
	resp, err := http.Get(h.URL() + host.PathHealthz)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Empty(t, h.Received())

	h.SetDown(false)
	_, err = apply(t, h, decl(1, ctr("api", 'a', 1)))
	require.NoError(t, err)
}

func TestToken(t *testing.T) {
	h := hosttest.New(t, "m1", hosttest.WithToken("tok"))
	c, err := host.NewHTTPClient(h.URL(), "wrong", nil)
	require.NoError(t, err)
	_, err = c.Apply(context.Background(), decl(1, ctr("api", 'a', 1)))
	r := requireRefused(t, err, host.CodeUnauthorized)
	assert.Equal(t, http.StatusUnauthorized, r.Status)
	assert.Empty(t, h.Received())

	_, err = apply(t, h, decl(1, ctr("api", 'a', 1)))
	require.NoError(t, err)
	resp, err := http.Get(h.URL() + host.PathHealthz)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestMaxInFlightObservesOverlap(t *testing.T) {
	h := hosttest.New(t, "m1", hosttest.WithApplyDelay(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	post := func(seq uint64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.Client().Apply(ctx, decl(seq, ctr("api", 'a', int64(seq))))
		}()
	}
	post(1)
	require.Eventually(t, func() bool { return len(h.Received()) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1, h.MaxInFlight())
	post(2)
	// The first POST is still inside its minute-long delay when the second
	// is received, so both were in flight at once.
	require.Eventually(t, func() bool { return len(h.Received()) == 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 2, h.MaxInFlight())
	cancel()
	wg.Wait()
	assert.Len(t, h.Applied(), 2)
}

func TestMaxInFlightSerialCallers(t *testing.T) {
	h := hosttest.New(t, "m1", hosttest.WithApplyDelay(5*time.Millisecond))
	for seq := uint64(1); seq <= 3; seq++ {
		_, err := apply(t, h, decl(seq, ctr("api", 'a', int64(seq))))
		require.NoError(t, err)
	}
	assert.Equal(t, 1, h.MaxInFlight())
}

func TestLostAnswerThenRepeat(t *testing.T) {
	h := hosttest.New(t, "m1", hosttest.WithApplyDelay(time.Minute))
	c, err := host.NewHTTPClient(h.URL(), "", &http.Client{Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	d := decl(1, ctr("api", 'a', 1))
	_, err = c.Apply(context.Background(), d)
	require.True(t, host.IsUnreachable(err), "%v", err)

	// The host recorded it before the answer was lost.
	rep := h.Report()
	assert.Equal(t, uint64(1), rep.LastSeq)
	assert.Equal(t, d.Request, rep.LastRequest)

	// Sending it again is recognised as the repeat it is (the answer is
	// slow again, but nothing new is applied).
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Apply(ctx, d)
	require.True(t, host.IsUnreachable(err), "%v", err)
	assert.Len(t, h.Applied(), 1, "the resend was a repeat")
	assert.Len(t, h.Received(), 2)
}

func TestConcurrentPostsApplyInOrder(t *testing.T) {
	h := hosttest.New(t, "m1")
	var wg sync.WaitGroup
	for seq := uint64(1); seq <= 40; seq++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.Client().Apply(context.Background(), decl(seq, ctr("api", 'a', int64(seq))))
		}()
	}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.Client().Report(context.Background())
		}()
	}
	wg.Wait()
	applied := h.Applied()
	require.NotEmpty(t, applied)
	for i := 1; i < len(applied); i++ {
		assert.Less(t, applied[i-1].Seq, applied[i].Seq)
	}
	assert.Len(t, h.Received(), 40)
	assert.Equal(t, applied[len(applied)-1].Seq, h.Report().LastSeq)
}

func TestAccessorsReturnCopies(t *testing.T) {
	h := hosttest.New(t, "m1")
	d := decl(1, ctr("api", 'a', 1))
	d.Containers[0].Args = []string{"x"}
	_, err := apply(t, h, d)
	require.NoError(t, err)
	got := h.Applied()
	got[0].Containers[0].Args[0] = "changed"
	assert.Equal(t, "x", h.Applied()[0].Containers[0].Args[0])
	rep := h.Report()
	rep.Containers[0].State = "bogus"
	assert.Equal(t, mesh.StateRunning, h.Report().Containers[0].State)
}
