// Package agentcmd is the host agent binary's command line: it reads the
// agent's settings from flags, MESHROLL_HOST_* variables and a YAML file,
// then serves the machine's host API (package agent) until stopped.
//
// It lives outside package main so that host/main.go is a thin exit-code
// mapper like the starter's, and tests run the command in process. It is
// not part of package agent, which is the agent itself and knows nothing of
// flags, variables or files.
package agentcmd

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/cmdrun"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/logging"
)

// Execute runs the host agent's command line with args (without the
// program name) until ctx ends (the agent then finishes the requests in
// flight and closes its journal) or it fails. Logs go to stderr, --help to
// stdout. Give the error to cmdrun.ExitCode for the exit status: a setting
// refused before anything started is a cmdrun.UsageError (exit 2). Its text
// is what main prints after "host: "; it never carries the token or the
// registry password.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cmdrun.Execute(ctx, command(), args, stdout, stderr)
}

func command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "host --machine NAME [flags]",
		Short: "Serve a machine's host API and run what its machine workflow declares",
		Long: `host is meshroll's host agent. Every flag is also ` + envPrefix + `_<FLAG> (dashes as
underscores) and a key of the --config file (dashes as underscores). A flag
beats a variable, which beats the file.

Exit codes: 0 stopped cleanly (SIGINT, SIGTERM), 1 error, 2 usage.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdrun.Usagef("unexpected arguments %q", args)
			}
			s, err := load(cmd.Flags())
			if err != nil {
				return err
			}
			return serve(cmd.Context(), s, cmd.ErrOrStderr())
		},
	}
	defineFlags(cmd.Flags())
	return cmd
}

// defineFlags puts the agent's flags on fs; keys maps them to the
// variables' and the file's keys.
func defineFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML file with settings (default $"+envPrefix+"_CONFIG)")
	fs.String("listen", "127.0.0.1:7400", "address to serve the host API on")
	fs.String("machine", "", "machine this agent answers for (required)")
	fs.String("state", "", "state directory (default .meshroll/hosts/<machine>)")
	fs.String("token", "", "bearer token the API requires (prefer "+envPrefix+"_TOKEN: flags show in ps)")
	fs.String("token-file", "", "file holding the bearer token (the safest place for it)")
	fs.Bool("trusted-network", false, "serve without a token beyond loopback: only trusted hosts can reach --listen (without it, an agent listening beyond loopback needs a token)")
	fs.String("tls-cert", "", "PEM certificate to serve TLS with (with --tls-key)")
	fs.String("tls-key", "", "PEM private key of --tls-cert")
	fs.String("runtime", agent.RuntimeNoop, "runtime: noop (runs nothing, for trying meshroll without images), exec (pulls images by digest and runs their entrypoints as child processes) or docker (Docker Engine API; Podman's compatible service with the settings docs/host-api.md#podman gives)")
	fs.String("docker-socket", agent.DefaultDockerSocket, "the Docker engine's unix socket, for --runtime docker")
	fs.Duration("noop-start-delay", 0, "how long the noop runtime reports a container starting before running")
	fs.String("registry", "", "OCI registry host[:port] (or http(s)://host[:port]) the exec and docker runtimes authenticate pulls from; images elsewhere are pulled anonymously (docker: as the engine is configured)")
	fs.String("registry-username", "", "user for --registry")
	fs.String("registry-password", "", "password for --registry (prefer "+envPrefix+"_REGISTRY_PASSWORD: flags show in ps)")
	fs.Bool("registry-insecure", false, "allow plain HTTP to --registry")
	fs.String("registry-ca-file", "", "PEM bundle to trust for registries besides the system roots")
	fs.Duration("exec-stop-grace", 0, "how long the exec runtime gives a process between SIGTERM and SIGKILL (default 10s)")
	fs.Duration("exec-healthy-after", 0, "how long an exec process must stay up to count as running (default 1s)")
	fs.String("ports", agent.DefaultPorts.String(), "where to pick the ports of containers whose probe asks for one (MIN-MAX; keep it below the kernel's ephemeral range, net.ipv4.ip_local_port_range)")
	fs.String("enroll", "", "the worker's enrollment URL (such as http://worker:8236): ask it to let this machine into the mesh, with the token of --enroll-token-file (or "+envPrefix+"_ENROLL_TOKEN); empty asks nothing")
	fs.String("enroll-token-file", "", "file holding the mesh's enrollment token, for --enroll (or set "+envPrefix+"_ENROLL_TOKEN)")
	fs.String("labels", "", "this machine's labels for --enroll, k=v,k=v (such as site=lab,ring=canary): the tiers' selects place it by them")
	fs.String("advertise", "", "base URL the worker reaches this agent's host API at, for --enroll (default http://<--listen address>, https:// with --tls-cert)")
	fs.Duration("enroll-every", enroll.DefaultEvery, "how often a machine pending enrollment asks again, for --enroll")
	fs.Bool("metrics", true, "serve Prometheus metrics on "+agent.PathMetrics+" (unauthenticated, read-only, no secrets)")
	fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.String("log-format", logging.FormatAuto, "log format: json, console, auto (console on a terminal)")
}
