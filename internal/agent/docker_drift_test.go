package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A container that stops for good is started again after a wait that
// doubles while it keeps stopping (1s, 2s, 4s ... 30s), and starts over
// from 1s once it has run calm for 10s.
func TestReviverWaitsDoubling(t *testing.T) {
	var starts atomic.Int32
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/start") {
			starts.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(engine.Close)
	r := NewDockerRuntime("edge-1", engine.URL)
	dc := &dockerContainer{id: "c1"}
	v := reviver{wait: reviveFirst}
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ctx := context.Background()

	// Stopped at 0: the first look only notes it; started again 1s later.
	v.look(ctx, r, dc, true, at(0))
	v.look(ctx, r, dc, true, at(900*time.Millisecond))
	require.EqualValues(t, 0, starts.Load(), "not before its wait")
	v.look(ctx, r, dc, true, at(time.Second))
	require.EqualValues(t, 1, starts.Load())
	require.Equal(t, 1, r.revivals(dc), "counted as a restart")

	// It stops again at once: the wait is now 2s.
	v.look(ctx, r, dc, true, at(1100*time.Millisecond))
	v.look(ctx, r, dc, true, at(2500*time.Millisecond))
	require.EqualValues(t, 1, starts.Load())
	v.look(ctx, r, dc, true, at(3100*time.Millisecond))
	require.EqualValues(t, 2, starts.Load())
	require.Equal(t, 4*time.Second, v.wait)

	// Running calm for 10s starts the wait over.
	v.look(ctx, r, dc, false, at(4*time.Second))
	v.look(ctx, r, dc, false, at(14*time.Second))
	require.Equal(t, reviveFirst, v.wait)

	// The wait never passes 30s.
	v = reviver{wait: 20 * time.Second}
	v.look(ctx, r, dc, true, at(20*time.Second))
	v.look(ctx, r, dc, true, at(40*time.Second))
	require.Equal(t, reviveMost, v.wait)
}
