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

// waitFor follows a plan until it reaches state (or fails the test if it
// ends first).
func waitFor(t *testing.T, s *stack, id string, state meshapi.PlanStatus) meshapi.PlanState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reached := make(chan meshapi.PlanState, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, _ = plans.Wait(wctx, s.c, id, 100*time.Millisecond, func(st meshapi.PlanState) {
			if st.State == state {
				select {
				case reached <- st:
				default:
				}
			}
		})
	}()
	select {
	case st := <-reached:
		return st
	case <-ctx.Done():
		st, _ := plans.State(context.Background(), s.c, id)
		require.FailNow(t, "plan did not reach state", "%s: want %s, is %s (%s)", id, state, st.State, st.Reason)
		return meshapi.PlanState{}
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
