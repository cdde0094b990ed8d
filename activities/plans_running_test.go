package activities

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunningCacheSharesOneAsk: pushes asking at once about one plan share
// one call; its answer serves the next runningFresh, then a new ask is
// made; a failed ask is not kept; each plan is asked on its own.
func TestRunningCacheSharesOneAsk(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	fail := atomic.Bool{}
	c := newRunningCache(func(_ context.Context, plan string) (string, bool, error) {
		calls.Add(1)
		<-release
		if fail.Load() {
			return "", false, errors.New("frontend busy")
		}
		return "Running", true, nil
	})
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	ask := func(n int, plan string) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, running, err := c.Running(context.Background(), plan)
				if err == nil && !running {
					err = errors.New("not running")
				}
				errs[i] = err
			})
		}
		// Every asker is either the one calling or waiting on it before the
		// call is let through.
		require.Eventually(t, func() bool { return calls.Load() >= 1 }, 10*time.Second, time.Millisecond)
		close(release)
		wg.Wait()
		release = make(chan struct{})
		return errs
	}

	for _, err := range ask(50, "plan/host/a") {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, calls.Load(), "fifty asks at once, one call")

	close(release) // answers from here on come at once
	_, _, err := c.Running(context.Background(), "plan/host/a")
	require.NoError(t, err)
	require.EqualValues(t, 1, calls.Load(), "a fresh answer serves")
	advance(runningFresh + time.Millisecond)
	_, _, err = c.Running(context.Background(), "plan/host/a")
	require.NoError(t, err)
	require.EqualValues(t, 2, calls.Load(), "a stale answer is asked again")
	_, _, err = c.Running(context.Background(), "plan/host/b")
	require.NoError(t, err)
	require.EqualValues(t, 3, calls.Load(), "another plan is its own ask")

	fail.Store(true)
	advance(runningFresh + time.Millisecond)
	_, _, err = c.Running(context.Background(), "plan/host/a")
	require.Error(t, err)
	_, _, err = c.Running(context.Background(), "plan/host/a")
	require.Error(t, err)
	require.EqualValues(t, 5, calls.Load(), "a failed answer is not kept")
	require.Len(t, c.entries, 1, "stale entries are dropped")
}
