package benchwf_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/meshroll/meshroll/internal/bench/benchwf"
	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// The engine's ceiling of a fleet larger than the server's 2,000 pending
// activities a workflow may have ends on a real server: every workflow
// task of a FanOut that scheduled all of them at once failed, and was
// retried for ever.
func TestFanOutPastTheServersPendingLimitEnds(t *testing.T) {
	srv := devserver.Start(t, devserver.Options{})
	c := srv.Client()
	const queue = "fan-out"
	w := worker.New(c, queue, workerapp.WorkerOptions())
	benchwf.Register(w, &benchwf.Activities{Client: c})
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "fan-out-2500", TaskQueue: queue},
		benchwf.FanOutWorkflowType, benchwf.FanOutInput{Activities: 2500})
	require.NoError(t, err)
	require.NoError(t, r.Get(ctx, nil), "the fan-out ends")
}
