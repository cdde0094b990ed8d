package plans

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// queryClient answers QueryWorkflow with errs in turn, then succeeds.
type queryClient struct {
	client.Client
	errs  []error
	calls int
}

func (q *queryClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	q.calls++
	if len(q.errs) > 0 {
		err := q.errs[0]
		q.errs = q.errs[1:]
		return nil, err
	}
	return nil, nil
}

func TestQueryStateRetriesOnlyTransientFailures(t *testing.T) {
	reset := status.Error(codes.Canceled, "stream terminated by RST_STREAM with error code: CANCEL")
	cases := []struct {
		name      string
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{"answers at once", nil, 1, false},
		{"stream reset, then busy, then answers", []error{reset, serviceerror.NewResourceExhausted(0, "busy")}, 3, false},
		{"unavailable, wrapped", []error{fmt.Errorf("frontend: %w", serviceerror.NewUnavailable("restarting"))}, 2, false},
		{"no such workflow is final", []error{serviceerror.NewNotFound("no workflow")}, 1, true},
		{"refused query is final", []error{serviceerror.NewInvalidArgument("unknown query")}, 1, true},
		{"gives up after the attempts", []error{reset, reset, reset, reset, reset, reset}, queryAttempts, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &queryClient{errs: c.errs}
			_, err := query(context.Background(), q, "machine/m1", meshapi.QueryState)
			if (err != nil) != c.wantErr || q.calls != c.wantCalls {
				t.Errorf("err = %v after %d calls; want error %v after %d", err, q.calls, c.wantErr, c.wantCalls)
			}
		})
	}
}

func TestQueryStateStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := &queryClient{errs: []error{serviceerror.NewUnavailable("down"), serviceerror.NewUnavailable("down")}}
	_, err := query(ctx, q, "plan/x/y", meshapi.QueryState)
	if err == nil || q.calls != 1 {
		t.Errorf("err = %v after %d calls; want the first error, no retry once the context is done", err, q.calls)
	}
	if !errors.As(err, new(*serviceerror.Unavailable)) {
		t.Errorf("err = %v, want the call's own error", err)
	}
}
