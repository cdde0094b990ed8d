package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// rollbackReq is a rollback plan's push of module at generation gen.
func rollbackReq(plan, module string, gen int64) meshapi.PushRequest {
	r := req(plan, module, gen)
	r.Rollback = &meshapi.Rollback{By: "ops", Reason: "on fire"}
	r.Declaration.Rollback = true
	return r
}

// putBackReq is the put-back a merge plan sends after its tier's analysis
// failed: Rollback with From, the build it puts the machine back from.
func putBackReq(plan, module string, gen int64) meshapi.PushRequest {
	r := rollbackReq(plan, module, gen)
	r.From = &mesh.Build{Module: module, Generation: gen + 1}
	return r
}

// queueHarness is a machine whose first push, inFlight, takes a minute, so
// that what is signalled next queues behind it.
func queueHarness(t *testing.T, inFlight meshapi.PushRequest) *machineHarness {
	h := newMachineHarness(t)
	h.delay = time.Minute
	h.signalAt(0, inFlight)
	return h
}

// A rollback or a put-back that arrives behind queued merge pushes is
// served right after the push in flight, which is not interrupted; among
// rollbacks and among merges the queue stays first come, first served. (The
// rollback priority of their push activities is checked against a real
// server, whose history keeps it: the test environment drops it.)
func TestMachineServesRollbacksFirst(t *testing.T) {
	inFlight := req("plan/a/1", "a", 1)
	b, c := req("plan/b/1", "b", 1), req("plan/c/1", "c", 1)
	rb := rollbackReq("rollback/x", "x", 1)
	put := putBackReq("plan/y/2", "y", 1)
	d := req("plan/d/1", "d", 1)
	want := []string{inFlight.Plan, rb.Plan, put.Plan, b.Plan, c.Plan, d.Plan}
	h := queueHarness(t, inFlight)
	h.signalAt(time.Second, b, c, rb, put, d)
	var seen meshapi.MachineState
	var details string
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(meshapi.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&seen))
		details = currentDetails(t, h.env)
	}, 2*time.Second)
	h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 6})

	var served []string
	for _, p := range h.pushes {
		served = append(served, p.Request.Plan)
	}
	require.Equal(t, want, served, "order the machine served its pushes in")
	require.Equal(t, inFlight.Request, seen.Current.Request, "the push in flight is not interrupted")
	var queued []string
	for _, q := range seen.Queue {
		queued = append(queued, q.Plan)
		require.Equal(t, q.Plan == rb.Plan || q.Plan == put.Plan, q.Rollback, "%s marked as a rollback", q.Plan)
	}
	require.Equal(t, want[1:], queued, "the queue as the query shows it is the order it is served in")
	require.Contains(t, details, "x generation 1 (sha256:", "details name the rollback")
	require.Contains(t, details, "for rollback/x (rollback: first in line)")
	require.NotContains(t, details, "for plan/b/1 (rollback")
}

// A rollback is never dropped for a newer build of its module, queued
// before it or after: it runs first, and the newer build after it (sent
// only if it is not rejected by then, which the push checks at send time).
// Merges keep newest-wins among themselves.
func TestMachineRollbackIsNeverSuperseded(t *testing.T) {
	inFlight := req("plan/a/1", "a", 1)
	cases := []struct {
		name       string
		requests   []meshapi.PushRequest
		served     []string
		superseded string
	}{
		{name: "rollback behind a newer queued build",
			requests: []meshapi.PushRequest{req("plan/host/3", "host", 3), rollbackReq("rollback/host", "host", 1)},
			served:   []string{inFlight.Plan, "rollback/host", "plan/host/3"}},
		{name: "newer merge behind a queued rollback",
			requests: []meshapi.PushRequest{rollbackReq("rollback/host", "host", 1), req("plan/host/3", "host", 3)},
			served:   []string{inFlight.Plan, "rollback/host", "plan/host/3"}},
		{name: "merges keep newest-wins beside a rollback",
			requests: []meshapi.PushRequest{req("plan/host/2", "host", 2), rollbackReq("rollback/host", "host", 1), req("plan/host/3", "host", 3)},
			served:   []string{inFlight.Plan, "rollback/host", "plan/host/3"}, superseded: "plan/host/2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := queueHarness(t, inFlight)
			h.signalAt(time.Second, tc.requests...)
			h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: len(tc.served)})
			var served []string
			for _, p := range h.pushes {
				served = append(served, p.Request.Plan)
			}
			require.Equal(t, tc.served, served)
			if tc.superseded == "" {
				return
			}
			a, ok := h.answer(meshapi.RequestID(tc.superseded, "m1"))
			require.True(t, ok, "%s answered", tc.superseded)
			require.Equal(t, meshapi.MachineSuperseded, a.Outcome, a.Reason)
		})
	}
}
