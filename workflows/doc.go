// Package workflows holds meshroll's two durable workflows.
//
// Plan is one merge: build, compose every machine that runs the module, then
// push tier by tier, with gates, pause and abort. Machine is one machine's
// long-running workflow and the only writer to its host: it takes push
// requests (by signal) one at a time, lets a newer build of a module supersede
// older queued ones, and runs the push activity, which checks what the host
// runs before it sends. Plans and machines talk only by signals carrying the
// typed messages of package meshapi.
//
// Workflow code here is deterministic: no clocks, randomness, I/O, goroutines
// or map iteration outside the workflow package's own primitives. A change
// that alters the commands either workflow issues needs a workflow.GetVersion
// gate and a history committed under testsuite/testdata/histories for the
// replay tests (TestCaptureHistories with a new captureTag).
//
// # Retiring a version branch
//
// A GetVersion branch keeps the code of runs that started before it. It is
// removed, with the histories that only it replays, once no run that started
// before it can still be open. Plans end on their own; machine workflows
// continue as new, and a run that continued as new after the change started
// on the new code. An operator checks that none is left with a visibility
// query for runs still open that started before the change, for example
//
//	temporal workflow count --query "ExecutionStatus = 'Running' AND StartTime < '2026-12-03T00:00:00Z'"
//
// or, under Worker Versioning, for runs still open on the build IDs before it
// ("TemporalWorkerDeploymentVersion = 'meshroll.<build>'"). Zero for both
// workflow types means the branch can go: delete the GetVersion call and the
// code it guarded, keep the new path, and delete the histories recorded
// before it. The SDK skips a history's version markers that code no longer
// asks for, so the histories recorded after the change keep replaying. A
// retired change ID is never used again: an old history still carries its
// marker.
//
// Retired so far (2026-12-03, before meshroll ran any fleet in production):
// "search-attributes" and "batches" of Plan, "push-answers" of Machine.
// The replay set in testsuite/testdata/histories is this baseline.
package workflows
