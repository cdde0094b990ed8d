// Package workercmd is the worker binary's command line: it runs meshroll's
// Temporal worker on a mesh config or, with --dev, the whole development
// mesh (package devstack).
//
// It lives outside package main so that worker/main.go is a thin
// exit-code mapper like the starter's, and tests run the command in process.
// It is not part of package workerapp because devstack imports workerapp
// and this package imports devstack.
package workercmd

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/cmdrun"
	"github.com/meshroll/meshroll/internal/devstack"
	"github.com/meshroll/meshroll/internal/logging"
)

// Execute runs the worker's command line with args (without the program
// name) until ctx ends (the worker then stops polling and returns) or it
// fails. Logs go to stderr; the dev stack's account of what it started, and
// --help, to stdout. linkedBuildID is the build ID linked into the binary
// (-ldflags "-X main.buildID=B"): Worker Versioning announces it when
// neither --build-id nor worker.versioning.build_id names one. It is a
// parameter because -X sets a variable of package main. Give the error to
// cmdrun.ExitCode for the exit status; its text is what main prints after
// "worker: ".
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer, linkedBuildID string) error {
	return cmdrun.Execute(ctx, command(linkedBuildID), args, stdout, stderr)
}

// options are one invocation's flags.
type options struct {
	config, logLevel, logFormat string

	dev     bool
	state   string
	uiPort  int
	runtime string
	// dockerSocket is the engine the dev stack's docker runtime uses.
	dockerSocket string

	metricsListen, buildID string
	makeCurrent            bool
	// linkedBuildID is Execute's; see there.
	linkedBuildID string
}

func command(linkedBuildID string) *cobra.Command {
	o := &options{linkedBuildID: linkedBuildID}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run meshroll's Temporal worker, or with --dev the whole dev mesh",
		Long: `worker runs meshroll's Temporal worker: it hosts the plan and machine
workflows and the activities that build, compose and push. The mesh config
is --config, else $MESHROLL_CONFIG, else mesh.yaml; MESHROLL_* variables
override its settings.

With --dev it starts the whole development mesh instead: a Temporal dev
server, the embedded registry, the catalogue, a host agent per machine and
the worker, with all state in --state. Ctrl-C stops it; a second Ctrl-C
stops it at once.

Exit codes: 0 stopped cleanly (SIGINT, SIGTERM), 1 error, 2 a flag it does
not know or cannot parse.`,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "mesh config file (default $MESHROLL_CONFIG or mesh.yaml; with --dev "+devstack.DefaultConfigPath+")")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error (with --dev the default is warn)")
	f.StringVar(&o.logFormat, "log-format", "auto", "log format: json, console, auto (console on a terminal)")
	f.BoolVar(&o.dev, "dev", false, "start the whole dev mesh: Temporal dev server, registry, catalogue, a host agent per machine and the worker")
	f.StringVar(&o.state, "state", devstack.DefaultStateDir, "with --dev: the directory holding all state (a restart on it resumes plans)")
	f.IntVar(&o.uiPort, "ui-port", devstack.DefaultUIPort, "with --dev: the Temporal Web UI's port")
	f.StringVar(&o.runtime, "runtime", devstack.DefaultRuntime, "with --dev: the host agents' runtime (noop, exec, docker)")
	f.StringVar(&o.dockerSocket, "docker-socket", agent.DefaultDockerSocket, "with --dev --runtime docker: the Docker engine's unix socket")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve the worker's /metrics, /livez and /readyz on this host:port (overrides worker.metrics_listen; with --dev too)")
	f.StringVar(&o.buildID, "build-id", "", "the build ID announced under Worker Versioning (overrides worker.versioning.build_id)")
	f.BoolVar(&o.makeCurrent, "make-current", false, "under Worker Versioning, make this build the deployment's current version once it polls (new plans and machine workflows move to it)")
	return cmd
}

// run checks the flags that go together, builds the logger and runs the
// worker or the dev stack.
func (o *options) run(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q", args)
	}
	set := cmd.Flags().Changed
	if !o.dev && (set("state") || set("ui-port") || set("runtime") || set("docker-socket")) {
		return fmt.Errorf("--state, --ui-port, --runtime and --docker-socket go with --dev")
	}
	if set("docker-socket") && o.runtime != agent.RuntimeDocker {
		return fmt.Errorf("--docker-socket goes with --runtime docker")
	}
	if o.dev && (set("build-id") || set("make-current")) {
		return fmt.Errorf("--build-id and --make-current do not go with --dev")
	}
	if o.dev && !set("log-level") {
		o.logLevel = "warn" // the terminal is for the stack's account; --log-level info shows the rest
	}
	log, err := logging.New(cmd.ErrOrStderr(), o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	if o.dev {
		return runDev(cmd.Context(), o, cmd.OutOrStdout(), log)
	}
	return runWorker(cmd.Context(), o, log)
}
