package workerapp

import (
	"time"

	"go.temporal.io/sdk/worker"
)

// WorkerOptions are the worker's concurrency and polling settings. They
// live apart from New so that the benchmark (internal/bench) measures the
// worker with exactly what is deployed, and so that tuning them is one
// reviewed change with the benchmark's numbers beside it
// (docs/benchmarks.md).
//
// Eight pollers of each kind to start with instead of the SDK's two: a
// tier hands out its pushes all at once, and the machine workflows' tasks
// then arrive together; with two pollers they queue at the server while
// the worker idles (a 100-machine plan took 3.5 s against 3.2 s with eight
// on the bench, machine workflows running: 3.2 s against 2.8 s).
//
// Workflow tasks are polled by the SDK's autoscaling pollers, which keep
// pollers on the task queue and on the worker's sticky queue apart. With
// a fixed number, every poller polls the sticky queue while the server's
// last answer from it reported a backlog, and a new machine workflow's
// first task, which is on the task queue, waits until one of those long
// polls ends empty: a minute. That was the minute-long stall of plans of
// a thousand machines (docs/benchmarks.md).
//
// A workflow task waits up to StickyTimeout on the worker's sticky queue,
// where the SDK waits 5 s. A tier hands out thousands of pushes at once,
// and their machine workflows' next tasks arrive on the sticky queue
// together; those the server has not dispatched within 5 s time out there
// and go back to the task queue with their whole history. Each costs two
// history events, a timer and a transfer on the server, and a replay on
// the worker: at 10,000 machines on two cores, 0.6 of them per machine
// pushed with 5 s, a tenth to a half of that with 30 s (docs/benchmarks.md,
// "The worker's pollers and its sticky queue").
//
// The execution-size limits stay the SDK's (1,000 activities, 1,000
// workflow tasks): the footprint scenario's 200 plans in flight stay far
// below them.
func WorkerOptions() worker.Options {
	return worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: 8,
			MinimumNumberOfPollers: 2,
			MaximumNumberOfPollers: 16,
		}),
		MaxConcurrentActivityTaskPollers: 8,
		StickyScheduleToStartTimeout:     StickyTimeout,
	}
}

// StickyTimeout is how long a workflow task waits for this worker on its
// sticky queue before the server moves it to the task queue, where any
// worker takes it and replays the workflow. What it costs: the tasks
// already on a worker's sticky queue when it stops wait this long for
// another worker. New tasks go to the task queue once the server sees the
// worker gone: at once when it stops cleanly, 10 s after a kill.
const StickyTimeout = 30 * time.Second

// RelayWorkerOptions are the relays' worker's: workflow tasks only (a relay
// runs no activity), with the SDK's two pollers, as a plan has at most a
// few relays open at once, each a handful of tasks. A relay's second task
// goes to the worker's sticky queue while both pollers wait on the relays'
// queue, where nothing else comes, and waits out the sticky timeout before
// the server moves it: measured at 3,000 machines, its first answers were
// passed on after 6.2 s with the SDK's five seconds, after 2.8–3.5 s with
// one.
func RelayWorkerOptions() worker.Options {
	return worker.Options{StickyScheduleToStartTimeout: time.Second}
}
