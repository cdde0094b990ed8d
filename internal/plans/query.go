package plans

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/codes"

	"github.com/meshroll/meshroll/internal/backoff"
)

// queryAttempts bounds how often query asks again after a transient
// failure.
const queryAttempts = 5

// query asks a running workflow the named query (meshapi.QueryState or
// meshapi.QuerySummary). A query travels from the frontend through history
// to a worker and back, and any hop may drop it under load or while a
// server or worker restarts (a stream reset, a busy frontend); those are
// asked again, a little later each time, until ctx ends. Anything else (no
// such workflow, a query the workflow refused) is returned at once.
func query(ctx context.Context, c client.Client, id, name string) (converter.EncodedValue, error) {
	b := backoff.New(100*time.Millisecond, 0)
	for attempt := 1; ; attempt++ {
		v, err := c.QueryWorkflow(ctx, id, "", name)
		if err == nil || attempt == queryAttempts || ctx.Err() != nil || !transient(err) {
			return v, err
		}
		if b.Wait(ctx) != nil {
			return nil, err
		}
	}
}

// unknownQuery says whether err is a workflow's answer that it has no
// handler for the query: a plan started by a build from before the query
// existed, pinned to that build under Worker Versioning. The SDK words it
// "unknown queryType <name>. KnownQueryTypes=[...]", and the server passes
// it on as a failed query.
func unknownQuery(err error) bool {
	var qf *serviceerror.QueryFailed
	return errors.As(err, &qf) && strings.Contains(qf.Message, "unknown queryType")
}

// transient says whether a failed call may succeed if made again.
func transient(err error) bool {
	switch serviceerror.ToStatus(err).Code() {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}
