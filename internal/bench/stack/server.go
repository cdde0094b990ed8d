// Package stack starts what the benchmark measures: a Temporal server of
// its own (the CLI's dev server, or the production topology's
// temporal-server on PostgreSQL), and meshes of in-process host agents (the noop runtime, each on
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
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devlaunch"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/prodserver"
	"github.com/meshroll/meshroll/internal/temporalcli"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// Server kinds, ServerOptions.Kind.
const (
	// ServerDev is the Temporal CLI's dev server (`temporal server
	// start-dev`), in memory: what the tests and the dev stack run.
	ServerDev = "dev"
	// ServerProduction is the production topology's temporal-server on
	// PostgreSQL, configured as deploy/ configures it (package
	// prodserver): what an operator runs.
	ServerProduction = "production"
)

// Namespace is the namespace the bench's meshes run in, on either server.
const Namespace = config.DefaultTemporalNamespace

// Server is a Temporal server the bench started and stops.
type Server struct {
	dev      *devlaunch.Process
	prod     *prodserver.Server
	client   client.Client
	hostPort string
	// Kind is ServerDev or ServerProduction.
	Kind string
	// Namespace is the namespace the bench's meshes, and its client, use.
	Namespace string
	// Compression is the temporal.grpc_compression the bench's workers
	// are configured with.
	Compression string
	// LocalPush is the push.local_activity of the bench's meshes.
	LocalPush bool
	// HandWindow is the push.hand_window of the bench's meshes (0: the
	// default).
	HandWindow int
	// CLI is the temporal binary that runs the dev server; CLIVersion
	// its version line.
	CLI        string
	CLIVersion string
	// ServerVersion is the production server's release
	// ("temporal-server v1.29.1") and PostgresVersion the version of the
	// PostgreSQL it runs on; empty on the dev server.
	ServerVersion   string
	PostgresVersion string
}

// ServerOptions are the settings an A/B of the engine's costs toggles.
type ServerOptions struct {
	// Kind is the server to start: ServerDev (the default) or
	// ServerProduction.
	Kind string
	// Postgres is the production server's PostgreSQL, the DSN of a role
	// that may create databases (the server's are created for the run
	// and dropped after it).
	Postgres string
	// Root is the meshroll repository whose deploy/ configures the
	// production server (default: prodserver.DefaultRoot, found from the
	// working directory).
	Root string
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
	// HandWindow sets push.hand_window in every mesh on this server (0
	// leaves the default): above a plan's largest tier, every push is
	// handed over at once.
	HandWindow int
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

// PostgresEnv is where the production server's PostgreSQL DSN is read
// from when ServerOptions.Postgres is empty, as the production test reads
// it.
const PostgresEnv = prodserver.PostgresEnv

// Check says what is wrong with so before a server starts: an unknown
// kind, a dev server's option with the production server (whose settings
// are deploy/temporal/dynamicconfig.yaml's, as an operator runs it), or the
// production server without PostgreSQL. Flags name the options, for the
// command line's error.
func (so ServerOptions) Check() error {
	switch so.Kind {
	case "", ServerDev:
		return nil
	case ServerProduction:
	default:
		return fmt.Errorf("-server: %q is not %s or %s", so.Kind, ServerDev, ServerProduction)
	}
	var devOnly []string
	for _, o := range []struct {
		flag string
		set  bool
	}{
		{"-server-db", so.DBFile != ""}, {"-old-matcher", so.OldMatcher}, {"-sa-cache", so.SACache}, {"-no-eager-activities", so.NoEagerActivities},
	} {
		if o.set {
			devOnly = append(devOnly, o.flag)
		}
	}
	if len(devOnly) > 0 {
		what := "is a dev server option: it"
		if len(devOnly) > 1 {
			what = "are dev server options: they"
		}
		return fmt.Errorf("%s %s cannot be combined with -server %s, which runs deploy/temporal/dynamicconfig.yaml as it is (change that file instead)",
			strings.Join(devOnly, ", "), what, ServerProduction)
	}
	if so.Postgres == "" {
		return fmt.Errorf("-server %s needs PostgreSQL: pass -postgres DSN or set %s (as root: export %s=\"$(bash scripts/postgres-test.sh)\")",
			ServerProduction, PostgresEnv, PostgresEnv)
	}
	return nil
}

// StartServer starts the server so.Kind names with meshroll's search
// attributes on namespace Namespace: the dev server (startDev), or the
// production topology's (startProduction).
func StartServer(ctx context.Context, log zerolog.Logger, out io.Writer, so ServerOptions) (*Server, error) {
	if err := so.Check(); err != nil {
		return nil, err
	}
	if so.Kind == ServerProduction {
		return startProduction(ctx, log, out, so)
	}
	return startDev(ctx, log, out, so)
}

// startDev starts `temporal server start-dev` (in memory unless
// so.DBFile) on a free loopback port with meshroll's search attributes and
// the same fast-matching settings the tests and the dev stack use, so that
// what is measured is what they run.
func startDev(ctx context.Context, log zerolog.Logger, out io.Writer, so ServerOptions) (*Server, error) {
	cli, err := temporalcli.Path()
	if err != nil {
		return nil, err
	}
	args := []string{"--namespace", Namespace, "--headless", "--log-level", "warn",
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
	co, err := clientOptions(log, so)
	if err != nil {
		return nil, err
	}
	// The server dies with the bench, even one stopped by a signal.
	dev, c, err := devlaunch.Launch(ctx, devlaunch.Options{CLI: cli, Args: args, Client: co, Out: out, DieWithParent: true})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server (%s): %w", cli, err)
	}
	s := &Server{dev: dev, client: c, hostPort: dev.HostPort(), Kind: ServerDev, Namespace: Namespace, CLI: cli, Compression: so.Compression, LocalPush: so.LocalPush, HandWindow: so.HandWindow}
	if v, err := exec.CommandContext(ctx, cli, "--version").Output(); err == nil {
		s.CLIVersion = strings.TrimSpace(string(v))
	}
	return s, nil
}

// clientOptions are how the bench's client, which the in-process worker
// runs on, is dialled: as the worker dials (temporalx.Options: compression
// as temporal.grpc_compression resolves for a loopback address, which
// every address a server is started on is).
func clientOptions(log zerolog.Logger, so ServerOptions) (client.Options, error) {
	return temporalx.Options(config.Temporal{Address: "127.0.0.1:0", Namespace: Namespace, GrpcCompression: so.Compression}, log.With().Str("component", "sdk").Logger())
}

// startProduction starts the production topology's temporal-server on
// so.Postgres (package prodserver: fresh databases with deploy/'s schema,
// the compose file's configuration, the server dying with the bench) and
// registers Namespace with deploy/temporal/create-namespace.sh, as an
// operator sets a cluster up. Its output, and a line per step, go to out.
func startProduction(ctx context.Context, log zerolog.Logger, out io.Writer, so ServerOptions) (_ *Server, err error) {
	logf := func(format string, args ...any) { _, _ = fmt.Fprintf(out, "--- prodserver: "+format+"\n", args...) }
	ps, err := prodserver.Start(ctx, prodserver.Options{Postgres: so.Postgres, Root: so.Root, Out: out, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("start the production Temporal server: %w", err)
	}
	defer func() {
		if err != nil {
			_ = ps.Close()
		}
	}()
	if err := ps.RegisterNamespace(ctx, Namespace); err != nil {
		return nil, err
	}
	co, err := clientOptions(log, so)
	if err != nil {
		return nil, err
	}
	co.HostPort = ps.Frontend()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, co)
	if err != nil {
		return nil, fmt.Errorf("dial the production Temporal server on %s: %w", ps.Frontend(), err)
	}
	return &Server{
		prod: ps, client: c, hostPort: ps.Frontend(), Kind: ServerProduction, Namespace: Namespace,
		Compression: so.Compression, LocalPush: so.LocalPush, HandWindow: so.HandWindow, ServerVersion: ps.Version(), PostgresVersion: ps.PostgresVersion(),
	}, nil
}

// Client is the bench's client of the server; Stop closes it.
func (s *Server) Client() client.Client { return s.client }

// HostPort is the frontend's address.
func (s *Server) HostPort() string { return s.hostPort }

// Usage is the server's peak RSS and CPU time so far: what a plan costs
// the engine, which bounds plans on a small box. On the production
// topology the CPU is temporal-server's and, when PostgreSQL runs on this
// machine, its store's (the postmaster and its backends, which other users
// of that PostgreSQL would add to); the RSS is temporal-server's.
func (s *Server) Usage() (Usage, error) {
	if s.prod == nil {
		return ReadUsage(s.dev.Pid())
	}
	u, err := ReadUsage(s.prod.Pid())
	if err != nil || s.prod.PostgresPid() == 0 {
		return u, err
	}
	pg, err := ReadTreeCPU(s.prod.PostgresPid())
	u.CPU += pg
	return u, err
}

// CountsPostgres is whether Usage's CPU includes PostgreSQL's.
func (s *Server) CountsPostgres() bool { return s.prod != nil && s.prod.PostgresPid() != 0 }

// Stop stops the server and waits for it; the production server's
// databases are dropped.
func (s *Server) Stop() error {
	s.client.Close()
	if s.prod != nil {
		if err := s.prod.Close(); err != nil {
			return fmt.Errorf("stop the production Temporal server: %w", err)
		}
		return nil
	}
	if err := s.dev.Stop(); err != nil {
		return fmt.Errorf("stop the Temporal dev server: %w", err)
	}
	return nil
}
