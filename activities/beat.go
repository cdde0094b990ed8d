package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// whileBeating runs call, heartbeating details every interval until it
// returns. A call that can outlast the activity's heartbeat timeout (a
// slow analysis provider, an answer queued behind other bundles) must not
// have the server time the activity out and run it again for nothing.
func whileBeating(ctx context.Context, every time.Duration, details any, call func()) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details)
			}
		}
	}()
	call()
}
