// Command host is meshroll's host agent: it serves a machine's host API
// (report, declarations, journal, health; see packages host and agent) and
// runs what the machine workflow declares. It keeps its journal and
// checkpoint in a state directory, so a restarted agent picks up where it
// was. The command lives in internal/agentcmd so that tests run it in
// process; this main only wires the process's streams and signals and turns
// the result into an exit code.
//
//	go run ./host --machine edge-1 [--listen 127.0.0.1:7400] [--state DIR]
//	              [--token-file F] [--tls-cert F --tls-key F]
//	              [--runtime noop|exec|docker] [--config host.yaml]
//	              [--registry HOST[:PORT] [--registry-username U]
//	               [--registry-insecure] [--registry-ca-file F]]
//
// Every setting also comes from MESHROLL_HOST_<KEY> (MESHROLL_HOST_TOKEN,
// MESHROLL_HOST_LOG_LEVEL, ...) and from the YAML file given by --config (or
// MESHROLL_HOST_CONFIG), with keys named like the variables without the
// prefix (listen, machine, state, token, token_file, tls_cert, tls_key,
// runtime, docker_socket, noop_start_delay, registry, registry_username,
// registry_password, registry_insecure, registry_ca_file, exec_stop_grace,
// exec_healthy_after, metrics, log_level, log_format). A flag beats a variable, which
// beats the file. The registry password is best given as
// MESHROLL_HOST_REGISTRY_PASSWORD (a flag shows in ps); it is never logged.
//
// Besides the host API the agent serves, without a token, /livez (the
// process serves), /readyz (its journal is open and writable) and, unless
// --metrics=false, Prometheus metrics on /metrics (applies by outcome,
// refusals by code, apply duration, journal size, containers by state; see
// package agent). None of them changes anything or shows a secret.
//
// The exec runtime keeps its image cache and the containers' logs in the
// state directory (images/, logs/; see package execrt).
//
// Flags are GNU-style: --machine x or --machine=x, not -machine x.
//
// Exit codes: 0 stopped cleanly (SIGINT, SIGTERM), 1 error, 2 usage.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshroll/meshroll/internal/agentcmd"
	"github.com/meshroll/meshroll/internal/cmdrun"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := agentcmd.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
	}
	os.Exit(cmdrun.ExitCode(err))
}
