// Package agent is meshroll's host agent: the process on each machine that
// the machine workflow declares containers to. It judges declarations by the
// rules of package host (host.Ledger: sequence, exact repeat, pinning, the
// floor), records every verdict durably before answering, hands accepted
// declarations to a Runtime and reports what runs. host.NewHandler serves it,
// so on the wire it answers exactly as the in-process test host (package
// hosttest) does; NewHandler adds GET /v1/journal.
//
// # The journal
//
// The journal is the agent's record of everything it was told and did:
// every declaration applied, acknowledged as a repeat or refused (with the
// refusal as the caller got it), with its sequence, plan, request, the merge
// the plan names, force (and the floor it overrode), every container and
// digest as told, and the runtime; every container reaching running,
// crash-looping or exiting; and every change of a probed container's health
// (healthy, unhealthy, with what the probe said) and its floor rising
// (floor-raised). It is the record that answers "which plan put this digest
// on this machine, was it forced, and why did it fail", newest first, paged by
// entry index (declaration sequences cannot page it: a refused stale
// declaration carries a sequence below ones already journalled).
//
//	GET /v1/journal?before=INDEX&limit=N   200 JournalPage
//
// before=0 (or absent) starts at the newest entry; limit defaults to
// DefaultJournalLimit and may be at most MaxJournalLimit. The page's
// next_before fetches the next older page and is 0 on the oldest. The
// journal needs the bearer token like the report does.
//
// # On disk
//
// The state directory holds three files:
//
//	journal.jsonl  the journal, one Entry as JSON per line, oldest first,
//	               only ever appended to; entry N is line N and says so
//	               in its "index"
//	ledger.json    the checkpoint: {"version":1, "journal_index":N,
//	               "written":..., "ledger":host.Ledger, "containers":[...]}
//	               where journal_index is the last entry it reflects
//	lock           flocked while an agent runs on the directory
//
// # Crash consistency
//
// The journal is the log of record and its synced "applied" entry is the
// commit point of an apply; ledger.json is a checkpoint derived from it. An
// apply runs, one at a time:
//
//  1. judge the declaration (host.Ledger.Admit);
//  2. append its entry to the journal and fsync it; refusals and repeats are
//     answered here;
//  3. update the ledger in memory and write ledger.json (temporary file,
//     fsync, rename, fsync the directory);
//  4. hand the containers to the runtime and answer.
//
// A container counting healthy is journalled (append, fsync) before it
// raises the floor (host.Ledger.Ran), and checkpointed after: its running
// entry for a container without a check, its floor-raised entry for one
// with. So the
// checkpoint may lag the journal but never lead it, and on start the agent
// replays the entries after the checkpoint's journal_index: a crash between
// 2 and 3 leaves an applied entry the checkpoint lacks, and the restarted
// agent rolls forward to it, which makes the entry true before the agent
// answers anyone. Nobody was told 200 for it, which the protocol allows: a
// sender whose answer was lost reads the report, finds its request there and
// goes on. A crash during 2 leaves at most a torn last line, never synced
// whole and never answered; the agent drops it on start, so the journal
// claims nothing that did not happen. A bad line anywhere but last is
// corruption and the agent refuses to start rather than guess.
//
// A journal append that fails while running is cut back off the file; if even
// that fails the agent refuses further declarations until restarted (it still
// answers the report and the journal). A checkpoint that fails is retried at
// the next change: the apply stands, since its entry is committed, but is
// answered 500 so the failing disk does not go unnoticed.
//
// On start the agent also hands the current declaration to the runtime again
// (reconcile): every container reports starting until the runtime says it
// runs. The exec runtime's processes die with the agent; the docker
// runtime's containers outlive it and are adopted by name, not restarted.
// An agent started on an empty state directory asks a Finder runtime
// (docker) what its machine still runs, and journals and keeps that as a
// "found" entry at sequence 0 until the first declaration (found.go).
//
// # Health
//
// The agent judges each container's health itself (health.go), whatever
// the runtime: a runtime only says what state a container is in and how
// often it restarted it. A container declared without a check is healthy
// while it runs and raises its floor when it reaches running, as before
// health existed. One with a check is probed every interval once it runs (an
// http GET or a tcp connect on loopback, or a command the runtime runs in
// the container: Execer), is healthy from its first passing probe, and
// raises its floor once it has been healthy for min_healthy without a break:
// a failed probe, an exit or a restart empties healthy_since, and the next
// pass starts it again. The noop runtime runs nothing, so its probes are
// taken as passed. The clock behind intervals and min_healthy is injected,
// so tests advance it instead of sleeping.
//
// A probe port of mesh.PortAuto gets a free loopback port, picked when the
// declaration is applied and kept while the container is declared
// unchanged; the runtime is handed the container with that port as its
// probe's and in its environment as mesh.EnvPort, while the report keeps
// the check as declared. The journal names the ports picked.
//
// The report has a revision that moves on with every change of it (a probe
// repeating the last outcome aside), so the report can be long-polled
// (WaitReport; GET /v1/report?after=&wait=, see package host).
//
// # Runtimes
//
// A Runtime turns a list of containers into running ones and reports their
// states. NoopRuntime runs nothing and reports each container running
// (optionally after a delay): it is for trying meshroll without images, and
// every answer's Meshroll-Runtime header, every journal entry and the log say
// so. The exec runtime (package execrt) pulls each image by digest from its
// OCI registry, verifies it, unpacks it into the state directory (cached by
// digest) and supervises its entrypoint as a child process. The docker
// runtime runs the same declaration through the Docker Engine API.
package agent
