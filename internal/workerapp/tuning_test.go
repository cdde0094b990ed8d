package workerapp

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A fixed number of workflow pollers (one Mixed pool) all poll the sticky
// queue while it last reported a backlog, and a new machine workflow's
// first task waits out a minute-long poll: plans of a thousand machines
// stalled a minute in one run in three. The autoscaling behavior keeps the
// task queue's pollers apart from the sticky queue's.
func TestWorkflowTasksArePolledApartFromTheStickyQueue(t *testing.T) {
	o := WorkerOptions()
	assert.Zero(t, o.MaxConcurrentWorkflowTaskPollers, "a fixed number of workflow pollers shares one pool between the sticky queue and the task queue")
	assert.Contains(t, fmt.Sprintf("%T", o.WorkflowTaskPollerBehavior), "Autoscaling")
}

// A tier's pushes bring their machine workflows' next tasks to the sticky
// queue together: with the SDK's 5 s, those not dispatched in time go back
// to the task queue and are replayed from their first event (at 10,000
// machines, more than half a task per machine pushed).
func TestStickyTasksWaitLongerThanTheSDKsFiveSeconds(t *testing.T) {
	assert.Greater(t, WorkerOptions().StickyScheduleToStartTimeout, 5*time.Second)
	assert.Equal(t, time.Second, RelayWorkerOptions().StickyScheduleToStartTimeout, "the relays' worker keeps its own")
}
