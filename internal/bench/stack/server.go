// Package stack starts what the benchmark measures: a Temporal dev server of
// its own, and meshes of in-process host agents (the noop runtime, each on
// its own loopback listener) with their mesh config, catalogue and worker.
//
// It is the dev stack's pieces put together for measuring rather than for
// developing: many small meshes, one per scenario run, each on its own task
// queue and with machine names of its own, so that one run's machine
// workflows and histories never mix with another's.
package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devlaunch"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/temporalcli"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// Server is a Temporal dev server the bench started and stops.
type Server struct {
	dev      *devlaunch.Process
	client   client.Client
	hostPort string
	// Compression is the temporal.grpc_compression the bench's workers
	// are configured with.
	Compression string
	// LocalPush is the push.local_activity of the bench's meshes.
	LocalPush bool
	// CLI is the temporal binary that runs it; CLIVersion its version line.
	CLI        string
	CLIVersion string
}

// ServerOptions are the settings an A/B of the engine's costs toggles.
type ServerOptions struct {
	// Compression is the workers' temporal.grpc_compression (default:
	// auto, which is none on the loopback address the server listens on).
	Compression string
	// NoEagerActivities turns the server's eager activity dispatch off, as
	// servers up to 1.31 ship it.
	NoEagerActivities bool
	// LocalPush sets push.local_activity in every mesh on this server, so
	// that machine workflows push by local activities (a push's server
	// tasks: the request's signal, one workflow task, the answer).
	LocalPush bool
	// DBFile, when set, is the server's SQLite file (--db-filename)
	// instead of memory, so that the store can be read after a run. It
	// does not keep the server up: under 10,000 machines the store wedged
	// the same way in a file as in memory, every query "interrupted (9)"
	// (docs/benchmarks.md).
	DBFile string
	// OldMatcher turns the priority task matcher off
	// (matching.useNewMatcher=false, as servers up to 1.31 ship it), to
	// read a stall against the matcher that task priorities need.
	OldMatcher bool
	// SACache has the server keep search attributes and namespaces in
	// its caches, as a production server does
	// (system.forceSearchAttributesCacheRefreshOnRead=false), to read
	// what the CLI's setting costs: it reads them from the store on every
	// use, so that a namespace's new ones are seen at once, which the
	// tests need (they register them as they create their namespaces).
	SACache bool
}

// StartServer starts `temporal server start-dev` (in memory unless
// so.DBFile) on a free loopback port with meshroll's search attributes and
// the same fast-matching settings the tests and the dev stack use, so that
// what is measured is what they run.
func StartServer(ctx context.Context, log zerolog.Logger, out io.Writer, so ServerOptions) (*Server, error) {
	cli, err := temporalcli.Path()
	if err != nil {
		return nil, err
	}
	args := []string{"--namespace", "default", "--headless", "--log-level", "warn",
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false"}
	args = append(append(args, temporalcli.FastDynamicConfig...), temporalcli.SearchAttributeArgs(meshapi.SearchAttributeTypes)...)
	if so.NoEagerActivities {
		args = append(args, "--dynamic-config-value", "system.enableActivityEagerExecution=false")
	}
	if so.DBFile != "" {
		// A file left by another run would bring its workflows into this one.
		if _, err := os.Stat(so.DBFile); err == nil {
			return nil, fmt.Errorf("the dev server's database %s exists: remove it, or name a new file", so.DBFile)
		}
		args = append(args, "--db-filename", so.DBFile)
	}
	if so.OldMatcher {
		args = append(args, "--dynamic-config-value", "matching.useNewMatcher=false")
	}
	if so.SACache {
		args = append(args, "--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false")
	}
	// The client the in-process worker runs on is dialled as the worker
	// dials (temporalx.Options: compression as temporal.grpc_compression
	// resolves for a loopback address, which every address the server is
	// started on is).
	co, err := temporalx.Options(config.Temporal{Address: "127.0.0.1:0", Namespace: "default", GrpcCompression: so.Compression}, log.With().Str("component", "sdk").Logger())
	if err != nil {
		return nil, err
	}
	// The server dies with the bench, even one stopped by a signal.
	dev, c, err := devlaunch.Launch(ctx, devlaunch.Options{CLI: cli, Args: args, Client: co, Out: out, DieWithParent: true})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server (%s): %w", cli, err)
	}
	s := &Server{dev: dev, client: c, hostPort: dev.HostPort(), CLI: cli, Compression: so.Compression, LocalPush: so.LocalPush}
	if v, err := exec.CommandContext(ctx, cli, "--version").Output(); err == nil {
		s.CLIVersion = strings.TrimSpace(string(v))
	}
	return s, nil
}

// Client is the bench's client of the server; Stop closes it.
func (s *Server) Client() client.Client { return s.client }

// HostPort is the frontend's address.
func (s *Server) HostPort() string { return s.hostPort }

// Usage is the server process's peak RSS and CPU time so far: what a plan
// costs the engine, which bounds plans on a small box.
func (s *Server) Usage() (Usage, error) { return ReadUsage(s.dev.Pid()) }

// Stop stops the server and waits for it.
func (s *Server) Stop() error {
	s.client.Close()
	if err := s.dev.Stop(); err != nil {
		return fmt.Errorf("stop the Temporal dev server: %w", err)
	}
	return nil
}
