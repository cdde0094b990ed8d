// Package workflows holds meshroll's two durable workflows.
//
// Plan is one merge: build, compose every machine that runs the module, then
// push tier by tier, with gates, pause and abort. Machine is one machine's
// long-running workflow and the only writer to its host: it takes push
// requests (by signal) one at a time, lets a newer build of a module supersede
// older queued ones, and runs the push activity, which checks what the host
// runs before it sends. Plans and machines talk only by signals carrying the
// typed messages of package meshapi. Beside them run short workflows: the
// operator's levers, the relays of large plans, and Receive, one delivery
// of the merge receiver (package webhook), which fetches the clone and
// starts the plans of the modules a push touched. Two more live as long as
// machines do and follow the same rule as Machine: FleetBudget, the fleet's
// one budget of unavailable machines, and Enrollment, one machine's ask to
// join (package enroll) and the operator's decision on it.
//
// Workflow code here is deterministic: no clocks, randomness, I/O, goroutines
// or map iteration outside the workflow package's own primitives.
//
// # Keeping runs safe across worker upgrades: one rule
//
// Every change that alters the commands either workflow issues goes behind
// a workflow.GetVersion gate, with its change ID declared in versions.go
// and histories of the new path committed under testsuite/testdata/histories
// for the replay tests (TestReplayHistories) — for Plan and Machine alike,
// whether or not the worker runs under Worker Versioning.
//
// Why one rule for both, and gates rather than versioning alone: Worker
// Versioning is optional (worker.versioning, off by default and in the dev
// stack), and a machine workflow lives for months across every upgrade, so
// for it the gate is the only protection there is; a plan lives minutes to
// days, and under versioning it is pinned to the build that started it, but
// an unversioned deployment restarts its workers under plans in flight, and
// the gate is what keeps those plans replaying. Versioning, when on, is the
// second layer: a pinned plan never meets new code at all, and machine
// workflows auto-upgrade (the reason their gates matter most).
//
// What an operator runs for an upgrade: without versioning, a rolling
// restart of the workers, nothing else; with it, start the new build's
// workers with --make-current (or temporal worker deployment
// set-current-version), and stop the old build's once no plan is pinned to
// it (docs/observability.md, "Upgrading the worker (Worker Versioning)").
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
//	temporal workflow count --query "ExecutionStatus = 'Running' AND StartTime < '2026-12-04T00:00:00Z'"
//
// or, under Worker Versioning, for runs still open on the build IDs before it
// ("TemporalWorkerDeploymentVersion = 'meshroll:<build>'"). Zero for both
// workflow types means the branch can go: delete the GetVersion call and the
// code it guarded, keep the new path, move the change ID to retiredChanges
// in versions.go, and delete the histories recorded before it. The SDK
// skips a history's version markers that code no longer asks for, so the
// histories recorded after the change keep replaying. A retired change ID is
// never used again: an old history still carries its marker. Retiring every
// gate at once and recording the replay set afresh makes a baseline
// (versions.go names them); so does wire and state compatibility code that
// only a build before the baseline could need.
package workflows
