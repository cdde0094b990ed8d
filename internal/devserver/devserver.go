// Package devserver starts a real Temporal dev server (the official Temporal
// CLI's `temporal server start-dev`) for integration tests.
//
// It is test support, in a normal (non _test) file so that any package's
// tests can import it:
//
//	srv := devserver.Start(t, devserver.Options{})
//	c := srv.Client()
//
// The CLI is found by CLIPath. When it is missing the test is skipped, or
// fails when the CI environment variable is set, with a message telling how to
// install it (scripts/install-temporal.sh). With `go test -short` the test is
// skipped.
//
// The server's output and the SDK client's logs go to an in-memory log that
// is written to the test log only when the test failed, so passing tests stay
// quiet.
package devserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/devlaunch"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/payloads"
	"github.com/meshroll/meshroll/internal/temporalcli"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
)

// CLIEnv names the environment variable that points at the temporal binary.
const CLIEnv = temporalcli.Env

// CLIVersion is the Temporal CLI version the project pins.
const CLIVersion = temporalcli.Version

// InstallHint tells how to get the CLI.
const InstallHint = temporalcli.InstallHint

// FastDynamicConfig is passed to every server: one task queue partition makes
// matching (and so every workflow and activity task) prompt on a small box.
// It is temporalcli's, so that the worker's --dev server runs the same.
var FastDynamicConfig = temporalcli.FastDynamicConfig

// Options configures a dev server.
type Options struct {
	// DBFile persists the server's state to this SQLite file, so that
	// Restart keeps workflows. Empty means in memory.
	DBFile string
	// SearchAttributes are Keyword search attributes registered at start.
	// Other types can be registered with ExtraArgs
	// ("--search-attribute", "Name=Int").
	SearchAttributes []string
	// Namespace is created at start and used by Client. Default "default".
	Namespace string
	// HostPort is the frontend address, e.g. "127.0.0.1:7233". Empty means a
	// free port on 127.0.0.1.
	HostPort string
	// ServerLogLevel is the server's --log-level. Default "warn".
	ServerLogLevel string
	// ExtraArgs are appended to `temporal server start-dev ...`.
	ExtraArgs []string
	// Logger is the SDK logger of Client (and of workers built on it).
	// Default: the server log (see Log), at info level.
	Logger log.Logger
	// StartTimeout bounds one start. Default 2 minutes.
	StartTimeout time.Duration
	// UIPort, when set, serves the Web UI on that port (UI tests); the UI
	// is off otherwise.
	UIPort string
}

// Server is a running (or stopped) dev server owned by one test.
type Server struct {
	opts     Options
	cliPath  string
	hostPort string
	log      *devlaunch.TailBuffer

	mu     sync.Mutex
	proc   *devlaunch.Process // nil while stopped
	client client.Client      // lives across Restart
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Start starts a dev server for t and registers a cleanup that stops it (and
// writes its log to t's log if t failed). It skips or fails t when the CLI
// is missing; see the package doc. Tests that need no server of their own
// (no restart, no Web UI) share one instead: see Launch and NewNamespace.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	Require(t)
	s, err := newServer(opts)
	if err != nil {
		t.Fatalf("devserver: %v", err)
	}
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Errorf("devserver: stopping server at %s: %v", s.hostPort, err)
		}
		if t.Failed() {
			t.Logf("devserver: log of the Temporal dev server at %s (%s):\n%s", s.hostPort, s.describe(), s.Log())
		}
	})
	if err := s.launch(); err != nil {
		t.Fatalf("devserver: %v", err)
	}
	return s
}

// Require skips t with -short, and when the CLI is missing skips it, or
// fails it when the CI environment variable is set: what every test of a
// dev server does before it asks for one.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("devserver: Temporal dev server tests are skipped with -short")
	}
	if _, err := CLIPath(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("devserver: %v", err)
		}
		t.Skipf("devserver: %v", err)
	}
}

// Launch starts a dev server no test owns: one a package's tests share,
// each in a namespace of its own (NewNamespace), so that the package pays
// for one server start rather than one per test. Close stops it; a test
// binary that dies first takes it along (the server gets SIGTERM when its
// parent dies).
func Launch(opts Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops a server from Launch and closes its client.
func (s *Server) Close() error { return s.shutdown() }

// newServer checks and completes opts.
func newServer(opts Options) (*Server, error) {
	cli, err := CLIPath()
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.ServerLogLevel == "" {
		opts.ServerLogLevel = "warn"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	for _, name := range opts.SearchAttributes {
		if !identRE.MatchString(name) {
			return nil, fmt.Errorf("search attribute name %q is not an identifier", name)
		}
	}
	if opts.DBFile != "" {
		abs, err := filepath.Abs(opts.DBFile)
		if err != nil {
			return nil, fmt.Errorf("DBFile: %w", err)
		}
		opts.DBFile = abs
	}
	s := &Server{opts: opts, cliPath: cli, hostPort: opts.HostPort, log: devlaunch.NewTailBuffer(4 << 20)}
	if s.opts.Logger == nil {
		zl, err := logging.New(s.log, "info", logging.FormatConsole)
		if err != nil {
			return nil, err
		}
		s.opts.Logger = logging.Temporal(zl.With().Str("component", "sdk").Logger())
	}
	return s, nil
}

// launch starts the server the first time.
func (s *Server) launch() error {
	proc, c, err := s.start()
	if err != nil {
		return fmt.Errorf("starting Temporal dev server (%s): %w", s.describe(), err)
	}
	s.mu.Lock()
	s.proc = proc
	s.client = c
	s.hostPort = proc.HostPort()
	s.mu.Unlock()
	return nil
}

// NewNamespace registers a namespace of t's own on s and returns its name
// and a client of it (with identity, when not empty), closed when t ends.
// Tests sharing a server each take one, so that their workflow IDs (a
// machine workflow's is its machine's name), task queues and search
// attributes never meet. If t fails, the server's log lines that name the
// namespace go to t's log.
func (s *Server) NewNamespace(t testing.TB, identity string) (string, client.Client) {
	t.Helper()
	ns := fmt.Sprintf("t%d-%s", namespaces.Add(1), nsUnsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"))
	if len(ns) > 200 {
		ns = ns[:200]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatalf("devserver: register namespace %s: %v", ns, err)
	}
	c, err := client.NewClientFromExisting(s.Client(), client.Options{Namespace: ns, Identity: identity, Logger: s.opts.Logger, DataConverter: payloads.Converter})
	if err != nil {
		t.Fatalf("devserver: client of namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			t.Logf("devserver: the shared Temporal dev server's log lines naming namespace %s:\n%s", ns, s.linesNaming(ns))
		}
	})
	return ns, c
}

// namespaces numbers the namespaces NewNamespace registers, so that a
// name is never taken twice however tests are named.
var namespaces atomic.Int64

// nsUnsafe is what a namespace name should not hold.
var nsUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// linesNaming is the log lines holding word.
func (s *Server) linesNaming(word string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s.Log(), "\n") {
		if strings.Contains(l, word) {
			b.WriteString(l)
		}
	}
	return b.String()
}

func (s *Server) describe() string {
	d := "in memory"
	if s.opts.DBFile != "" {
		d = "db " + s.opts.DBFile
	}
	return fmt.Sprintf("%s, namespace %s, cli %s", d, s.opts.Namespace, s.cliPath)
}

// start runs the CLI on s.hostPort, or, before the first start of a server
// whose options name no address, on one devlaunch picks (another if the
// one picked was taken before the server bound it), and waits until its
// frontend answers.
func (s *Server) start() (*devlaunch.Process, client.Client, error) {
	args := []string{"--namespace", s.opts.Namespace,
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
		"--log-level", s.opts.ServerLogLevel}
	if s.opts.UIPort != "" {
		args = append(args, "--ui-port", s.opts.UIPort)
	} else {
		args = append(args, "--headless")
	}
	if s.opts.DBFile != "" {
		args = append(args, "--db-filename", s.opts.DBFile)
	}
	args = append(args, FastDynamicConfig...)
	for _, name := range s.opts.SearchAttributes {
		args = append(args, "--search-attribute", name+"=Keyword")
	}
	args = append(args, s.opts.ExtraArgs...)
	proc, c, err := devlaunch.Launch(context.Background(), devlaunch.Options{
		CLI: s.cliPath, HostPort: s.hostPort, Args: args, Out: s.log, Timeout: s.opts.StartTimeout,
		// A test binary that dies (a timeout, a fatal error) takes its
		// servers along, the package's shared one included.
		DieWithParent: true,
		Client:        client.Options{Namespace: s.opts.Namespace, Logger: s.opts.Logger, DataConverter: payloads.Converter},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w\n--- server log ---\n%s", err, s.log.String())
	}
	return proc, c, nil
}

// Client is a client of the server's namespace. It survives Restart (it
// reconnects) and is closed when the test ends; don't close it yourself.
func (s *Server) Client() client.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// ClientOptions returns options to dial the server yourself (code under test
// that builds its own client). Close what you dial.
func (s *Server) ClientOptions() client.Options {
	return client.Options{HostPort: s.hostPort, Namespace: s.opts.Namespace, Logger: s.opts.Logger, DataConverter: payloads.Converter,
		// On loopback, like the client Launch dials.
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}}}
}

// HostPort is the frontend gRPC address, e.g. "127.0.0.1:41234".
func (s *Server) HostPort() string { return s.hostPort }

// Namespace is the namespace Client uses.
func (s *Server) Namespace() string { return s.opts.Namespace }

// DBFile is the absolute SQLite file, or "" for an in-memory server.
func (s *Server) DBFile() string { return s.opts.DBFile }

// Log returns the server output and SDK client log so far (the last 4 MiB).
func (s *Server) Log() string { return s.log.String() }

// Stop stops the server process and waits for it to exit. The client stays
// usable for Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	proc := s.proc
	s.proc = nil
	s.mu.Unlock()
	if proc == nil {
		return nil
	}
	devlaunch.Mark(s.log, "stopping server")
	err := proc.Stop()
	devlaunch.Mark(s.log, "server stopped")
	return err
}

// Restart stops the server and starts it again on the same DBFile and
// address; workflows started before are still there. Client keeps working
// (it reconnects, as do workers built on it). It fails t for an in-memory
// server.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.opts.DBFile == "" {
		t.Fatalf("devserver: Restart needs Options.DBFile (an in-memory server would lose everything)")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("devserver: restart: %v", err)
	}
	proc, c, err := s.start()
	if err != nil {
		t.Fatalf("devserver: restarting Temporal dev server at %s: %v", s.hostPort, err)
	}
	c.Close() // Client() keeps the first one
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()
}

func (s *Server) shutdown() error {
	s.mu.Lock()
	c := s.client
	s.client = nil
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return s.Stop()
}

// CLIPath finds the temporal CLI: $MESHROLL_TEMPORAL_CLI if set (it must
// exist), else `temporal` on PATH, else $GOBIN/temporal, else
// temporal in each GOPATH's bin. The error says how to install it. It is
// temporalcli.Path, which the worker's --dev mode uses too.
func CLIPath() (string, error) { return temporalcli.Path() }
