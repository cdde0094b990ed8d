package workerapp

import "go.temporal.io/sdk/worker"

// WorkerOptions are the worker's concurrency and polling settings. They
// live apart from New so that the benchmark (internal/bench) measures the
// worker with exactly what is deployed, and so that tuning them is one
// reviewed change with the benchmark's numbers beside it
// (docs/benchmarks.md).
func WorkerOptions() worker.Options {
	return worker.Options{}
}
