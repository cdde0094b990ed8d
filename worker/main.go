// Command worker runs meshroll's Temporal worker: it hosts the plan and
// machine workflows and the activities that build, compose and push. The
// command lives in internal/workercmd so that tests run it in process; this
// main only wires the process's streams and signals and turns the result
// into an exit code (0 stopped cleanly, 1 error, 2 a flag it does not know
// or cannot parse).
//
//	go run ./worker [--config mesh.yaml] [--log-level info] [--log-format auto]
//	                [--metrics-listen 127.0.0.1:9090] [--build-id B] [--make-current]
//
// --config defaults to $MESHROLL_CONFIG, else mesh.yaml. --metrics-listen
// (worker.metrics_listen) serves Prometheus metrics on /metrics and the
// probes /livez and /readyz. worker.ui_listen serves the read-only fleet
// page (package fleetui; a token beyond loopback); worker.webhook_listen
// the merge receiver (package webhook), whose signed push events from the
// git host start plans. Tracing (worker.tracing) and Worker Versioning
// (worker.versioning) are set in the mesh config; the build ID a versioned
// worker announces is --build-id, else worker.versioning.build_id, else the
// one linked in with -ldflags "-X main.buildID=B", else the git revision Go
// stamped in. --make-current makes that build the deployment's current
// version once the worker polls (the first deployment, or a switch-over as
// soon as the new worker is up); otherwise an operator does it with
// `temporal worker deployment set-current-version`.
//
// With --dev it starts the whole development mesh instead (package
// devstack): a Temporal dev server, the embedded registry, the catalogue, a
// host agent per machine and the worker, with every piece's state in one
// directory so that stopping and starting again resumes plans in flight.
// It prints what it started and where, then "ready"; Ctrl-C stops it all,
// a second Ctrl-C at once.
//
//	go run ./worker --dev [--config examples/mesh.yaml] [--state .meshroll]
//	                      [--ui-port 8233] [--runtime noop] [--metrics-listen 127.0.0.1:9090]
//
// The dev stack serves the worker's /metrics only when asked (--metrics-listen
// or worker.metrics_listen), and prints where; it serves the fleet page at
// 127.0.0.1:8234 and the merge receiver at 127.0.0.1:8235 (its secret made
// once in the state directory) unless worker.ui_listen and
// worker.webhook_listen say otherwise.
//
// Flags are GNU-style: --config x or --config=x, not -config x.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshroll/meshroll/internal/cmdrun"
	"github.com/meshroll/meshroll/internal/workercmd"
)

// buildID is set at link time (-ldflags "-X main.buildID=...") by builds
// that name their version; see --build-id.
var buildID string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := workercmd.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr, buildID)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
	}
	os.Exit(cmdrun.ExitCode(err))
}
