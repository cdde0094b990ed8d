package plans

import (
	"context"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/codes"

	"github.com/meshroll/meshroll/internal/backoff"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// queryAttempts bounds how often queryState asks again after a transient
// failure.
const queryAttempts = 5

// queryState asks a running workflow for its state. A query travels from
// the frontend through history to a worker and back, and any hop may drop
// it under load or while a server or worker restarts (a stream reset, a
// busy frontend); those are asked again, a little later each time, until
// ctx ends. Anything else (no such workflow, a query the workflow
// refused) is returned at once.
func queryState(ctx context.Context, c client.Client, id string) (converter.EncodedValue, error) {
	b := backoff.New(100*time.Millisecond, 0)
	for attempt := 1; ; attempt++ {
		v, err := c.QueryWorkflow(ctx, id, "", meshapi.QueryState)
		if err == nil || attempt == queryAttempts || ctx.Err() != nil || !transient(err) {
			return v, err
		}
		if b.Wait(ctx) != nil {
			return nil, err
		}
	}
}

// transient says whether a failed call may succeed if made again.
func transient(err error) bool {
	switch serviceerror.ToStatus(err).Code() {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}
