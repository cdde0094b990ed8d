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
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/temporalcli"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// Server is a Temporal dev server the bench started and stops.
type Server struct {
	dev      *testsuite.DevServer
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
}

// StartServer starts `temporal server start-dev` in memory on a free
// loopback port with meshroll's search attributes and the same fast-matching
// settings the tests and the dev stack use, so that what is measured is what
// they run.
func StartServer(ctx context.Context, log zerolog.Logger, out io.Writer, so ServerOptions) (*Server, error) {
	cli, err := temporalcli.Path()
	if err != nil {
		return nil, err
	}
	hp, err := freeHostPort()
	if err != nil {
		return nil, err
	}
	args := append(slices.Clone(temporalcli.FastDynamicConfig), temporalcli.SearchAttributeArgs(meshapi.SearchAttributeTypes)...)
	if so.NoEagerActivities {
		args = append(args, "--dynamic-config-value", "system.enableActivityEagerExecution=false")
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The client the in-process worker runs on is dialled as the worker
	// dials (temporalx.Options: compression as temporal.grpc_compression
	// resolves for a loopback address).
	co, err := temporalx.Options(config.Temporal{Address: hp, Namespace: "default", GrpcCompression: so.Compression}, log.With().Str("component", "sdk").Logger())
	if err != nil {
		return nil, err
	}
	dev, err := testsuite.StartDevServer(sctx, testsuite.DevServerOptions{
		ExistingPath:  cli,
		ClientOptions: &co,
		LogLevel:      "warn",
		ExtraArgs:     args,
		Stdout:        out,
		Stderr:        out,
	})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server (%s): %w", cli, err)
	}
	s := &Server{dev: dev, client: dev.Client(), hostPort: hp, CLI: cli, Compression: so.Compression, LocalPush: so.LocalPush}
	if v, err := exec.CommandContext(ctx, cli, "--version").Output(); err == nil {
		s.CLIVersion = strings.TrimSpace(string(v))
	}
	return s, nil
}

// Client is the bench's client of the server; Stop closes it.
func (s *Server) Client() client.Client { return s.client }

// HostPort is the frontend's address.
func (s *Server) HostPort() string { return s.hostPort }

// Stop stops the server and waits for it.
func (s *Server) Stop() error {
	s.client.Close()
	if err := s.dev.Stop(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && !ee.Exited() {
			return nil // killed by our own interrupt
		}
		return fmt.Errorf("stop the Temporal dev server: %w", err)
	}
	return nil
}

func freeHostPort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
