package testsuite

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// pollEvery is how often the tests look again at something they wait for
// (a plan's state, a host's report, a log). It is polling, not
// synchronisation: every wait is bounded by its own deadline, and a shorter
// interval only notices sooner.
const pollEvery = 100 * time.Millisecond

// planWait bounds a wait for a plan to get somewhere.
const planWait = 2 * time.Minute

// waitFor waits until a plan is in state, and fails the test if it ends in
// another state first or is not there within planWait. msgAndArgs add to
// the failure (the race suite's seed and round).
func waitFor(t *testing.T, s *stack, id string, state meshapi.PlanStatus, msgAndArgs ...any) meshapi.PlanState {
	t.Helper()
	return waitUntil(t, s, id, "state "+string(state), func(st meshapi.PlanState) bool { return st.State == state }, msgAndArgs...)
}

// waitUntil waits until ok accepts a plan's state, and fails the test
// naming what it waited for if the plan ends without it (at once) or does
// not get there within planWait. It is a call to plans.WaitUntil, which the
// starter demo uses too.
func waitUntil(t *testing.T, s *stack, id, what string, ok func(meshapi.PlanState) bool, msgAndArgs ...any) meshapi.PlanState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), planWait)
	defer cancel()
	st, err := plans.WaitUntil(ctx, s.c, id, what, ok, pollEvery)
	require.NoError(t, err, msgAndArgs...)
	return st
}

// eventually calls f, on the test's goroutine (so that what f records can
// be used after), until it is true, and fails the test naming what it
// waited for if limit passes first. It is for what is not a plan's state (a
// host's report, a log, a list that visibility fills in late); a plan's
// state is waitUntil's, which also stops when the plan ends.
func eventually(t *testing.T, limit time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(pollEvery)
	}
}

func controlPlan(s *stack, id, update string, arg any) (meshapi.ControlResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return plans.Control(ctx, s.c, id, update, arg)
}

func progress(st meshapi.PlanState, machine string) meshapi.MachineProgress {
	m, _ := st.Machine(machine)
	return m
}

// stopGently sends sig to a process whose Wait closes done, SIGKILLs it if
// it has not exited within 30 s, and returns once it is gone; a process
// already gone is left alone.
func stopGently(p *os.Process, done <-chan struct{}, sig os.Signal) {
	select {
	case <-done:
		return
	default:
	}
	_ = p.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.Kill()
		<-done
	}
}
