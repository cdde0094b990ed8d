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
// gate and a history committed under testsuite/testdata for the replay tests.
package workflows
