package activities

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/host/hosttest"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// fixedHosts serves one test host per machine.
type fixedHosts map[string]*hosttest.Host

func (f fixedHosts) Host(machine string) (host.Client, error) {
	h, ok := f[machine]
	if !ok {
		return nil, fmt.Errorf("machine %q is not in the test mesh", machine)
	}
	return h.Client(), nil
}

func bld(module string, gen int64) mesh.Build {
	return mesh.Build{Module: module, Commit: fmt.Sprintf("%040x", gen), Digest: fmt.Sprintf("sha256:%064x", gen+int64(len(module))<<32), Generation: gen}
}

func running(b mesh.Build) mesh.RunningContainer {
	return mesh.RunningContainer{Module: b.Module, Digest: b.Digest, Generation: b.Generation, State: mesh.StateRunning}
}

func declared(b mesh.Build) mesh.Container {
	return mesh.Container{Module: b.Module, Digest: b.Digest, Generation: b.Generation, Commit: b.Commit}
}

// execute runs activity with in in env and decodes what it returned; the
// error is the activity's.
func execute[T any](t *testing.T, env *testsuite.TestActivityEnvironment, activity, in any) (T, error) {
	t.Helper()
	var out T
	v, err := env.ExecuteActivity(activity, in)
	if err == nil {
		require.NoError(t, v.Get(&out))
	}
	return out, err
}

// requireAppError requires err to be an application error of type typ and
// returns it.
func requireAppError(t *testing.T, err error, typ string, msgAndArgs ...any) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, msgAndArgs...)
	require.Equal(t, typ, appErr.Type(), msgAndArgs...)
	return appErr
}

type pushFixture struct {
	t     *testing.T
	env   *testsuite.TestActivityEnvironment
	host  *hosttest.Host
	cat   *catalogue.Memory
	plans *fakePlans
	acts  *Activities
	// handedAt is the requests' hand-over time (zero: none, which always
	// asks after its plan).
	handedAt time.Time
}

func newPushFixture(t *testing.T, opts ...hosttest.Option) *pushFixture {
	var s testsuite.WorkflowTestSuite
	f := &pushFixture{t: t, env: s.NewTestActivityEnvironment(), host: hosttest.New(t, "control-node", opts...), cat: catalogue.NewMemory()}
	f.plans = &fakePlans{}
	f.acts = &Activities{
		Mesh:         &config.Config{Machines: map[string]config.Machine{"control-node": {}}},
		Catalogue:    f.cat,
		Hosts:        fixedHosts{"control-node": f.host},
		Plans:        f.plans,
		PollInterval: time.Millisecond,
		Log:          zerolog.Nop(),
	}
	f.env.RegisterActivity(f.acts)
	return f
}

func (f *pushFixture) record(bs ...mesh.Build) {
	for _, b := range bs {
		require.NoError(f.t, f.cat.Record(context.Background(), b, "plan/test"))
	}
}

func (f *pushFixture) push(own mesh.Build, seq uint64, cs ...mesh.Container) (meshapi.PushOutcome, error) {
	req := meshapi.PushRequest{
		Request: meshapi.RequestID("plan/"+own.Module+"/"+own.Commit, "control-node"), Plan: "plan/" + own.Module + "/" + own.Commit,
		Machine: "control-node", Build: own,
		Declaration: mesh.Declaration{Machine: "control-node", Containers: cs},
		Policy:      meshapi.PushPolicy{RunningTimeout: 5 * time.Second, RetryBudget: time.Second},
		HandedAt:    f.handedAt,
	}
	return execute[meshapi.PushOutcome](f.t, f.env, f.acts.PushAndAnswer, meshapi.PushInput{Request: req, Seq: seq})
}

// The 2026-10-02 race: the host plan was composed when controller 10 ran;
// controller 11 has rolled out since. The push must send controller 11, not
// the 10 the plan recorded.
func TestPushRebasesStaleControllerOntoWhatRuns(t *testing.T) {
	f := newPushFixture(t)
	ctl10, ctl11 := bld("mesh-controller", 10), bld("mesh-controller", 11)
	host6, host7 := bld("host", 6), bld("host", 7)
	f.record(ctl10, ctl11, host6, host7)
	runningCtl := running(ctl11)
	runningCtl.Args, runningCtl.Env = []string{"--serve"}, map[string]string{"SEAT": "control"}
	f.host.Seed(runningCtl, running(host6))

	out, err := f.push(host7, 1, declared(host7), declared(ctl10))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineConverged, out.Outcome)
	require.Equal(t, []string{"mesh-controller"}, out.Rebased)

	applied := f.host.Applied()
	require.Len(t, applied, 1)
	sentCtl, _ := applied[0].Container("mesh-controller")
	require.Equal(t, ctl11.Digest, sentCtl.Digest, "the controller sent is the one running, never the stale one")
	require.Equal(t, runningCtl.Env, sentCtl.Env, "kept exactly as it runs, settings included")
	require.Equal(t, runningCtl.Args, sentCtl.Args)
	sentHost, _ := applied[0].Container("host")
	require.Equal(t, host7.Digest, sentHost.Digest)
}

func TestPushOfOlderOwnBuildIsSupersededAndSendsNothing(t *testing.T) {
	f := newPushFixture(t)
	ctl10, ctl11 := bld("mesh-controller", 10), bld("mesh-controller", 11)
	f.record(ctl10, ctl11)
	f.host.Seed(running(ctl11))

	out, err := f.push(ctl10, 1, declared(ctl10))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineSuperseded, out.Outcome)
	require.Contains(t, out.Reason, "generation 11")
	require.Empty(t, f.host.Received(), "nothing is sent to the machine")
}

func TestPushRefusesUnknownRunningDigest(t *testing.T) {
	f := newPushFixture(t)
	host7 := bld("host", 7)
	f.record(host7)
	stranger := mesh.RunningContainer{Module: "mesh-controller", Digest: "sha256:" + fmt.Sprintf("%064x", 999), Generation: 50, State: mesh.StateRunning}
	f.host.Seed(stranger)

	_, err := f.push(host7, 1, declared(host7))
	appErr := requireAppError(t, err, meshapi.ErrUnknownDigest)
	require.Contains(t, appErr.Error(), stranger.Digest)
	require.Empty(t, f.host.Received())
}

// A build an operator rejected while its push was queued is refused at
// send time with its own error type, naming who and why, and nothing is
// sent; the machine keeps what it runs.
func TestPushOfARejectedBuildSendsNothing(t *testing.T) {
	f := newPushFixture(t)
	host6, host7 := bld("host", 6), bld("host", 7)
	f.record(host6, host7)
	f.host.Seed(running(host6))
	_, err := f.cat.Reject(context.Background(), "host", host7.Commit, "alice", "crashes under load after an hour")
	require.NoError(t, err)

	_, err = f.push(host7, 1, declared(host7))
	appErr := requireAppError(t, err, meshapi.ErrRejected)
	require.Contains(t, appErr.Error(), "rejected by alice")
	require.Contains(t, appErr.Error(), "crashes under load after an hour")
	require.Empty(t, f.host.Received(), "nothing is sent to the machine")
}

func TestPushNumbersAboveTheHostsLastSequence(t *testing.T) {
	f := newPushFixture(t)
	h1, h2 := bld("host", 1), bld("host", 2)
	f.record(h1, h2)
	out, err := f.push(h1, 1, declared(h1))
	require.NoError(t, err)
	require.Equal(t, uint64(1), out.Seq)
	// The workflow was reset and proposes 1 again; the host is at 1.
	out, err = f.push(h2, 1, declared(h2))
	require.NoError(t, err)
	require.Equal(t, uint64(2), out.Seq, "numbering continues from the host's last sequence")
}

func TestPushRetryAfterLostAnswerAppliesNothingTwice(t *testing.T) {
	f := newPushFixture(t, hosttest.WithStartAfterReports(3))
	h1 := bld("host", 1)
	f.record(h1)
	// The first attempt's declaration landed and the worker died before it
	// heard back: the host has it and is still starting it.
	plan := "plan/host/" + h1.Commit
	_, err := f.host.Client().Apply(context.Background(), mesh.Declaration{
		Machine: "control-node", Seq: 1, Plan: plan, Request: meshapi.RequestID(plan, "control-node"),
		Containers: []mesh.Container{declared(h1)},
	})
	require.NoError(t, err)

	// The retry of the same request.
	out, err := f.push(h1, 1, declared(h1))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineConverged, out.Outcome)
	require.Equal(t, uint64(1), out.Seq)
	require.Len(t, f.host.Applied(), 1, "the retry applies nothing")
	require.Len(t, f.host.Received(), 1, "the retry does not even send")
}

// A build that crash-loops fails its machine, and the machine is put back
// on what it ran before the push, journalled by the host as a revert that
// names the plan and the failure.
func TestPushFailsOnCrashLoopAndPutsTheMachineBack(t *testing.T) {
	f := newPushFixture(t)
	h1, h2 := bld("host", 1), bld("host", 2)
	f.record(h1, h2)
	prior := running(h1)
	prior.Env = map[string]string{"ROLE": "edge"}
	f.host.Seed(prior)
	f.host.SetCrash(h2.Digest, true)
	_, err := f.push(h2, 1, declared(h2))
	appErr := requireAppError(t, err, meshapi.ErrUnhealthy)
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Message(), "is crash-looping")
	require.Contains(t, appErr.Message(), "put back on what it ran (declaration 2: host generation 1")
	var out meshapi.PushOutcome
	require.NoError(t, appErr.Details(&out))
	require.Equal(t, uint64(2), out.Seq, "the last sequence sent, the revert's, travels with the failure")
	require.Empty(t, f.plans.answered(), "a failed push is answered by the machine workflow, not the activity")

	applied := f.host.Applied()
	require.Len(t, applied, 2)
	revert := applied[1]
	require.True(t, revert.Revert)
	require.Equal(t, "plan/host/"+h2.Commit, revert.Plan, "the revert names the plan")
	require.Contains(t, revert.Reason, "is crash-looping", "and the failure")
	back, ok := revert.Container("host")
	require.True(t, ok)
	require.Equal(t, h1.Digest, back.Digest, "back on what it ran before")
	require.Equal(t, prior.Env, back.Env, "with the settings it ran with")
}

// A retried push that finds its revert as the host's last sends nothing:
// an earlier attempt already put the machine back.
func TestPushRetryAfterRevertSendsNothing(t *testing.T) {
	f := newPushFixture(t)
	h2 := bld("host", 2)
	f.record(h2)
	plan := "plan/host/" + h2.Commit
	_, err := f.host.Client().Apply(context.Background(), mesh.Declaration{
		Machine: "control-node", Seq: 2, Plan: plan, Request: revertID(meshapi.RequestID(plan, "control-node")),
		Revert: true, Containers: []mesh.Container{},
	})
	require.NoError(t, err)
	_, err = f.push(h2, 1, declared(h2))
	appErr := requireAppError(t, err, meshapi.ErrUnhealthy)
	require.Contains(t, appErr.Message(), "an earlier attempt of this push found host unhealthy")
	require.Len(t, f.host.Received(), 1, "nothing sent again")
}

// The revert's rule: only the plan's own module goes back; nothing goes
// below its floor.
func TestRevertDeclaration(t *testing.T) {
	h1, h2, h3, ctl4, ctl5 := declared(bld("host", 1)), declared(bld("host", 2)), declared(bld("host", 3)), declared(bld("ctl", 4)), declared(bld("ctl", 5))
	failed := mesh.Declaration{Machine: "m", Plan: "p", Containers: []mesh.Container{h3, ctl4}}
	for _, tc := range []struct {
		name  string
		prior *mesh.Container
		floor map[string]mesh.Container
		want  []mesh.Container
	}{
		{"back to what ran", &h2, nil, []mesh.Container{h2, ctl4}},
		{"what ran, lifted to the floor", &h1, map[string]mesh.Container{"host": h2}, []mesh.Container{h2, ctl4}},
		{"not known (a retry): the floor", nil, map[string]mesh.Container{"host": h2}, []mesh.Container{h2, ctl4}},
		{"never ran here: removed", nil, nil, []mesh.Container{ctl4}},
		{"another module below its floor is lifted", &h2, map[string]mesh.Container{"ctl": ctl5}, []mesh.Container{h2, ctl5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := revertDeclaration(failed, "host", tc.prior, tc.floor)
			require.Equal(t, tc.want, got.Containers)
		})
	}
}

func TestPushUnreachableHostIsRetryable(t *testing.T) {
	f := newPushFixture(t)
	h1 := bld("host", 1)
	f.record(h1)
	f.host.SetDown(true)
	_, err := f.push(h1, 1, declared(h1))
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		require.False(t, appErr.NonRetryable(), "an unreachable host is retried within the budget: %v", err)
	}
}

func TestPushWaitsUntilRunning(t *testing.T) {
	f := newPushFixture(t, hosttest.WithStartAfterReports(3))
	h1 := bld("host", 1)
	f.record(h1)
	out, err := f.push(h1, 1, declared(h1))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineConverged, out.Outcome)
	r, _ := f.host.Report().Running("host")
	require.Equal(t, mesh.StateRunning, r.State, "converged only once the host reports running")
	nc, ok, _ := f.cat.NewestConverged(context.Background(), "host")
	require.True(t, ok)
	require.Equal(t, h1.Digest, nc.Digest, "the build is marked converged")
	answers := f.plans.answered()
	require.Len(t, answers, 1, "the push answers its plan itself")
	require.Equal(t, meshapi.PushResult{Request: meshapi.RequestID("plan/host/"+h1.Commit, "control-node"), Plan: "plan/host/" + h1.Commit,
		Machine: "control-node", Outcome: meshapi.MachineConverged, Seq: 1}, answers[0])
}

// fakePlans says every plan runs unless it is listed in ended (with its
// status), and records the answers it is given.
type fakePlans struct {
	ended map[string]string

	mu       sync.Mutex
	answers  []meshapi.PushResult
	asked    int // Running calls
	measured []planMeasured
	started  []meshapi.AnalysisStarted
	// hold, when set, is what Answer waits for before it takes an answer.
	hold func() error
}

// planMeasured is one measured signal as the fake took it.
type planMeasured struct {
	plan string
	m    meshapi.Measured
}

func (p *fakePlans) Running(_ context.Context, plan string) (string, bool, error) {
	p.mu.Lock()
	p.asked++
	p.mu.Unlock()
	if status, ok := p.ended[plan]; ok {
		return status, false, nil
	}
	return "Running", true, nil
}

func (p *fakePlans) Taken(_ context.Context, plan string, tier int, check string) ([]meshapi.Measurement, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ms []meshapi.Measurement
	for _, m := range p.measured {
		if m.plan == plan && m.m.Tier == tier && m.m.Check.Check == check {
			ms = append(ms, m.m.Measurement)
		}
	}
	return ms, nil
}

func (p *fakePlans) Answer(_ context.Context, r meshapi.PushResult) error {
	if p.hold != nil {
		if err := p.hold(); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers = append(p.answers, r)
	return nil
}

func (p *fakePlans) Measured(_ context.Context, plan string, m meshapi.Measured) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.measured = append(p.measured, planMeasured{plan, m})
	return nil
}

func (p *fakePlans) Started(_ context.Context, plan string, s meshapi.AnalysisStarted) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = append(p.started, s)
	return nil
}

func (p *fakePlans) signals() []planMeasured {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]planMeasured(nil), p.measured...)
}

func (p *fakePlans) answered() []meshapi.PushResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]meshapi.PushResult(nil), p.answers...)
}

// A push queued by a plan an operator terminated is not sent: one handed
// over long ago (it waited behind other pushes) or one not stamped.
func TestPushOfTerminatedPlanSendsNothing(t *testing.T) {
	for _, handedAt := range []time.Time{{}, time.Now().Add(-time.Minute)} {
		f := newPushFixture(t)
		f.handedAt = handedAt
		h1 := bld("host", 1)
		f.record(h1)
		f.plans.ended = map[string]string{"plan/host/" + h1.Commit: "Terminated"}
		out, err := f.push(h1, 1, declared(h1))
		require.NoError(t, err)
		require.Equal(t, meshapi.MachineCancelled, out.Outcome)
		require.Contains(t, out.Reason, "no longer runs (Terminated)")
		require.Empty(t, f.host.Received(), "nothing sent")
	}
	// A plan that runs gets its push.
	f := newPushFixture(t)
	h1 := bld("host", 1)
	f.record(h1)
	out, err := f.push(h1, 1, declared(h1))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineConverged, out.Outcome)
}

// A push queued for a machine that has since left the mesh config (an
// operator removed it while the worker runs) is skipped in words, sends
// its host nothing, and is no failure: a plan counts it against no budget.
func TestPushToAMachineThatLeftIsSkipped(t *testing.T) {
	f := newPushFixture(t)
	h1 := bld("host", 1)
	f.record(h1)
	f.acts.Mesh = &config.Config{Machines: map[string]config.Machine{"edge-1": {}}}
	out, err := f.push(h1, 1, declared(h1))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineSkipped, out.Outcome)
	require.Equal(t, "skipped: machine control-node left the mesh config before its push; nothing was sent to it", out.Reason)
	require.True(t, out.Left, "the machine workflow is told to retire")
	require.Empty(t, f.host.Received(), "nothing sent")
}

// A push with a probe waits for the window and converges; one whose probe
// fails inside the window fails the machine, naming the module, the probe
// and what it answered.
func TestPushWaitsForHealth(t *testing.T) {
	t.Run("healthy through the window", func(t *testing.T) {
		f := newPushFixture(t)
		h1 := bld("host", 1)
		f.record(h1)
		c := declared(h1)
		c.Health = &mesh.Health{TCP: &mesh.TCPProbe{Port: 8080}, MinHealthyMS: 50}
		out, err := f.push(h1, 1, c)
		require.NoError(t, err)
		require.Equal(t, meshapi.MachineConverged, out.Outcome)
		require.Len(t, f.plans.answered(), 1)
	})
	t.Run("probe fails inside the window", func(t *testing.T) {
		f := newPushFixture(t)
		h1 := bld("host", 1)
		f.record(h1)
		c := declared(h1)
		c.Health = &mesh.Health{HTTP: &mesh.HTTPProbe{Port: 8080, Path: "/healthz"}, MinHealthyMS: 60_000}
		// Once the push has read the report after sending (it sees the
		// container healthy), the probe starts failing.
		go func() {
			for f.host.Reads() < 2 {
				runtime.Gosched()
			}
			f.host.SetHealth("host", mesh.HealthUnhealthy, &mesh.ProbeResult{Status: 503, Output: "warming caches"})
		}()
		_, err := f.push(h1, 1, c)
		appErr := requireAppError(t, err, meshapi.ErrUnhealthy)
		require.Contains(t, appErr.Error(), "host generation 1 ("+mesh.ShortDigest(h1.Digest)+") failed its http probe (GET :8080/healthz)")
		require.Contains(t, appErr.Error(), "last probe answered 503: warming caches")
		require.Empty(t, f.plans.answered(), "a failed push is answered by the machine workflow")
	})
}

// The amnesia case (issue 13): controller 3 ran healthy on the control
// node, then its agent lost its state and came back empty; a held host plan
// composed with controller 1 is approved. The push must send controller 3,
// from the machine workflow's floor, and say the host lost its state.
func TestPushToAHostThatLostItsStateUsesTheFloor(t *testing.T) {
	f := newPushFixture(t)
	ctl1, ctl3, host7 := bld("mesh-controller", 1), bld("mesh-controller", 3), bld("host", 7)
	f.record(ctl1, ctl3, host7)
	req := meshapi.PushRequest{
		Request: meshapi.RequestID("plan/host/"+host7.Commit, "control-node"), Plan: "plan/host/" + host7.Commit,
		Machine: "control-node", Build: host7,
		Declaration: mesh.Declaration{Machine: "control-node", Containers: []mesh.Container{declared(host7), declared(ctl1)}},
		Policy:      meshapi.PushPolicy{RunningTimeout: 5 * time.Second, RetryBudget: time.Second},
	}
	floor := map[string]mesh.Container{"mesh-controller": declared(ctl3)}
	out, err := execute[meshapi.PushOutcome](t, f.env, f.acts.PushAndAnswer, meshapi.PushInput{Request: req, Seq: 8, Floor: floor})
	require.NoError(t, err)

	require.Equal(t, meshapi.MachineConverged, out.Outcome)
	applied := f.host.Applied()
	require.Len(t, applied, 1)
	sentCtl, _ := applied[0].Container("mesh-controller")
	require.Equal(t, ctl3.Digest, sentCtl.Digest, "the floor's controller, never the stale one the plan composed")
	require.Equal(t, uint64(8), applied[0].Seq, "numbered after what the workflow sent")
	require.Contains(t, out.HostLostState, "reported last sequence 0, below the 7 its machine workflow had sent: it lost its state")
	require.Contains(t, out.Reason, "lost its state", "the plan's machine reason says so")
	require.Contains(t, applied[0].Reason, "lost its state", "and the declaration, which the host's new journal records")
	require.Equal(t, []string{"mesh-controller"}, out.Rebased)
}

// The floor's other record: with no machine-workflow record (a machine
// workflow started afresh) and a host that came back empty, the catalogue's
// newest build converged on the machine is the floor.
func TestPushFloorFromTheCatalogue(t *testing.T) {
	f := newPushFixture(t)
	quick := &config.Health{Interval: time.Second, Timeout: time.Second, Deadline: time.Minute} // min_healthy 0s
	f.acts.Mesh = &config.Config{Machines: map[string]config.Machine{"control-node": {}}, Modules: map[string]config.Module{"mesh-controller": {Health: quick}, "host": {Health: quick}}}
	ctl1, ctl3, host7 := bld("mesh-controller", 1), bld("mesh-controller", 3), bld("host", 7)
	f.record(ctl1, ctl3, host7)
	require.NoError(t, f.cat.MarkConverged(context.Background(), ctl3.Digest, "control-node"))
	require.NoError(t, f.cat.MarkConverged(context.Background(), ctl1.Digest, "edge-9"))

	out, err := f.push(host7, 1, declared(host7), declared(ctl1))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineConverged, out.Outcome)
	sentCtl, _ := f.host.Applied()[0].Container("mesh-controller")
	require.Equal(t, ctl3.Digest, sentCtl.Digest, "the catalogue's floor for this machine, not the stale composed copy")
	require.Empty(t, out.HostLostState, "the workflow had sent nothing: nothing to say it lost")
}

// A push started as soon as its plan handed it over does not ask the
// server whether the plan runs: it did a moment ago.
func TestFreshPushDoesNotAskItsPlan(t *testing.T) {
	f := newPushFixture(t)
	f.handedAt = time.Now()
	h1 := bld("host", 1)
	f.record(h1)
	out, err := f.push(h1, 1, declared(h1))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineConverged, out.Outcome)
	require.Zero(t, f.plans.asked, "no DescribeWorkflow for a fresh push")
}

func TestMustAskPlan(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name     string
		handedAt time.Time
		attempt  int32
		want     bool
	}{
		{"fresh first attempt", now.Add(-time.Second), 1, false},
		{"fresh retry", now.Add(-time.Second), 2, true},
		{"waited past PlanFresh", now.Add(-PlanFresh - time.Millisecond), 1, true},
		{"no hand-over time", time.Time{}, 1, true},
		{"stamped in the future", now.Add(time.Second), 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, mustAskPlan(meshapi.PushRequest{HandedAt: tt.handedAt}, tt.attempt, now))
		})
	}
}

// A push heartbeats while its answer waits for the bundles ahead of it, as
// it does while it waits for health: a wait longer than its heartbeat
// timeout must not have the server run it again for nothing.
func TestPushHeartbeatsWhileItsAnswerWaits(t *testing.T) {
	f := newPushFixture(t)
	f.env.SetWorkerOptions(worker.Options{DefaultHeartbeatThrottleInterval: time.Millisecond, MaxHeartbeatThrottleInterval: time.Millisecond})
	var answering atomic.Bool
	beat := make(chan struct{})
	var once sync.Once
	f.env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		if answering.Load() {
			once.Do(func() { close(beat) })
		}
	})
	f.plans.hold = func() error {
		answering.Store(true)
		select {
		case <-beat:
			return nil
		case <-time.After(eventually):
			return errors.New("no heartbeat while the answer waited")
		}
	}
	h1 := bld("host", 1)
	f.record(h1)
	out, err := f.push(h1, 1, declared(h1))
	require.NoError(t, err)
	require.Equal(t, meshapi.MachineConverged, out.Outcome)
	require.Len(t, f.plans.answered(), 1)
}
