package prodserver

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx" driver, for the databases' creation
	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devlaunch"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// Timeouts of Start's steps, as the production test has always allowed
// them on a loaded two-core box.
const (
	// SchemaTimeout bounds deploy/temporal/setup-schema.sh.
	SchemaTimeout = 5 * time.Minute
	// ReadyTimeout bounds the wait for the frontend's health check.
	ReadyTimeout = 3 * time.Minute
	// killWait bounds the wait for the killed server on Close.
	killWait = 30 * time.Second
)

// Options say where Start runs the server and with what.
type Options struct {
	// Postgres is the DSN of a PostgreSQL role that may create databases
	// (scripts/postgres-test.sh prints one): Start creates this run's
	// databases with it and Close drops them; the server logs in as it.
	Postgres string
	// Root is the meshroll repository's root, whose deploy/temporal/ and
	// docker-compose.yml configure the server. Empty: DefaultRoot.
	Root string
	// ComposeEnv are the variables docker-compose.yml interpolates, an
	// operator's .env (deploy/compose.env.example). Nil stands in
	// placeholders: the temporal service's one secret, POSTGRES_PWD, is
	// Postgres's password here anyway.
	ComposeEnv map[string]string
	// Binaries are the server and its SQL tool. Zero: FindBinaries.
	Binaries Binaries
	// ModuleDir is the server module in the module cache. Empty:
	// ModuleDir.
	ModuleDir string
	// ExtraDatabases name further empty databases the caller wants beside
	// Temporal's two (the production test's catalogue), created fresh with
	// the same suffix and dropped on Close with them; DSN gives each one's
	// address.
	ExtraDatabases []string
	// Dir receives the server's rendered config and dynamic config.
	// Empty: a temporary directory, removed on Close.
	Dir string
	// Out, when set, receives the server's output as well (Output keeps
	// its tail regardless).
	Out io.Writer
	// Logf, when set, receives a line per step done and its time: the
	// schema set up, the server answering, the namespace registered.
	Logf func(format string, args ...any)
}

// PostgresEnv names the variable holding the DSN of a PostgreSQL role that
// may create databases, which scripts/postgres-test.sh prints the value of:
// where the production test and the bench find Options.Postgres.
const PostgresEnv = "MESHROLL_TEST_POSTGRES_DSN"

// Databases' roles in Server.Database, beside Options.ExtraDatabases.
const (
	// DBTemporal is the server's persistence database.
	DBTemporal = "temporal"
	// DBVisibility is its visibility database.
	DBVisibility = "visibility"
)

// Server is a temporal-server Start started on its own fresh databases.
type Server struct {
	o         Options
	bins      Binaries
	moduleDir string
	root      string
	dir       string
	ownDir    bool
	pg        *url.URL
	admin     *sql.DB
	dbs       map[string]string // role -> database name
	pgVersion string
	pgPid     int
	schemaOut string
	proc      *devlaunch.Child
	out       *devlaunch.TailBuffer
	frontend  string
	metrics   string
}

// Start creates fresh databases on o.Postgres (Temporal's two through
// deploy/temporal/setup-schema.sh, o.ExtraDatabases directly) and starts
// temporal-server on them, as docker-compose.yml's temporal service runs
// it (the server module's config/docker.yaml template,
// deploy/temporal/dynamicconfig.yaml plus DynamicConfig, the service's
// environment) with loopback addresses and free ports, and a Prometheus
// endpoint; it returns once the frontend answers health checks. The server
// dies with the caller even if the caller is killed. A Start that fails
// leaves no process or database behind; Close undoes a Start that did not.
func Start(ctx context.Context, o Options) (_ *Server, err error) {
	if o.Postgres == "" {
		return nil, errors.New("the production Temporal server needs PostgreSQL: Options.Postgres is empty (scripts/postgres-test.sh prints a DSN)")
	}
	pg, err := url.Parse(o.Postgres)
	if err != nil || pg.User == nil || pg.Host == "" {
		return nil, fmt.Errorf("the PostgreSQL DSN %s is not a postgres://user:password@host:port/db URL (Options.Postgres)", sqlcat.RedactDSN(o.Postgres))
	}
	s := &Server{o: o, bins: o.Binaries, moduleDir: o.ModuleDir, root: o.Root, dir: o.Dir, pg: pg, dbs: map[string]string{}, out: devlaunch.NewTailBuffer(256 << 10)}
	if s.root == "" {
		if s.root, err = DefaultRoot(); err != nil {
			return nil, fmt.Errorf("the production Temporal server reads deploy/ and docker-compose.yml: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.root, "deploy", "temporal", "setup-schema.sh")); err != nil {
		return nil, fmt.Errorf("%s is not the meshroll repository's root (Options.Root): %w", s.root, err)
	}
	if s.bins == (Binaries{}) {
		if s.bins, err = FindBinaries(ctx); err != nil {
			return nil, err
		}
	}
	if s.moduleDir == "" {
		if s.moduleDir, err = ModuleDir(ctx); err != nil {
			return nil, err
		}
	}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "meshroll-prodserver-"); err != nil {
			return nil, fmt.Errorf("temporal-server's directory: %w", err)
		}
		s.ownDir = true
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if err := s.createDatabases(ctx); err != nil {
		return nil, err
	}
	// The ports are picked free, then closed, then bound by the server:
	// something else on the box can take one in between, so a start that
	// could not bind goes again on fresh ports, as devlaunch does.
	for attempt := 1; ; attempt++ {
		err = s.start(ctx)
		if err == nil || attempt == devlaunch.Attempts || !errors.Is(err, devlaunch.ErrAddressInUse) {
			break
		}
		s.logf("temporal-server could not bind a port picked free a moment before (attempt %d of %d); starting again on others: %v", attempt, devlaunch.Attempts, err)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// createDatabases makes this run's databases, each named after its role
// and a random suffix so that runs sharing a PostgreSQL never meet.
func (s *Server) createDatabases(ctx context.Context) error {
	var suffix [5]byte
	_, _ = rand.Read(suffix[:])
	sfx := hex.EncodeToString(suffix[:])
	roles := append([]string{DBTemporal, DBVisibility}, s.o.ExtraDatabases...)
	for _, role := range roles {
		if _, dup := s.dbs[role]; dup {
			return fmt.Errorf("database role %q is named twice (Options.ExtraDatabases)", role)
		}
		s.dbs[role] = "prod_" + role + "_" + sfx
	}
	admin, err := sql.Open("pgx", s.pg.String())
	if err != nil {
		return fmt.Errorf("PostgreSQL at %s: %w", sqlcat.RedactDSN(s.o.Postgres), err)
	}
	s.admin = admin
	if err := admin.QueryRowContext(ctx, "SELECT current_setting('server_version')").Scan(&s.pgVersion); err != nil {
		return fmt.Errorf("PostgreSQL at %s does not answer (start it: scripts/postgres-test.sh): %w", sqlcat.RedactDSN(s.o.Postgres), err)
	}
	var backend int
	if err := admin.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&backend); err == nil {
		s.pgPid = parentPid(backend)
	}
	for _, role := range s.o.ExtraDatabases {
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+s.dbs[role]); err != nil {
			return fmt.Errorf("create the %s database on %s: %w", role, sqlcat.RedactDSN(s.o.Postgres), err)
		}
	}

	pw, _ := s.pg.User.Password()
	started := time.Now()
	sctx, cancel := context.WithTimeout(ctx, SchemaTimeout)
	defer cancel()
	script := filepath.Join(s.root, "deploy", "temporal", "setup-schema.sh")
	cmd := exec.CommandContext(sctx, "sh", script)
	cmd.Env = append(baseEnv(),
		"SQL_HOST="+s.pg.Hostname(), "SQL_PORT="+pgPort(s.pg), "SQL_USER="+s.pg.User.Username(), "SQL_PASSWORD="+pw,
		"TEMPORAL_SCHEMA_DIR="+filepath.Join(s.moduleDir, "schema", "postgresql", "v12"), "TEMPORAL_SQL_TOOL="+s.bins.SQLTool,
		"TEMPORAL_DB="+s.dbs[DBTemporal], "TEMPORAL_VISIBILITY_DB="+s.dbs[DBVisibility])
	out, err := cmd.CombinedOutput()
	s.schemaOut = string(out)
	if err != nil {
		return fmt.Errorf("deploy/temporal/setup-schema.sh: %w:\n%s", err, Tail(s.schemaOut, 40))
	}
	if !strings.Contains(s.schemaOut, "setup-schema: done") {
		return fmt.Errorf("deploy/temporal/setup-schema.sh exited without saying setup-schema: done:\n%s", Tail(s.schemaOut, 40))
	}
	s.logf("Temporal schema set up on PostgreSQL %s in %v", s.pgVersion, time.Since(started).Round(time.Millisecond))
	return nil
}

// start runs temporal-server as the compose file's temporal service does
// and waits until the frontend answers health checks.
func (s *Server) start(ctx context.Context) error {
	root := filepath.Join(s.dir, "temporal")
	if err := os.MkdirAll(filepath.Join(root, "config"), 0o755); err != nil {
		return fmt.Errorf("temporal-server's config directory: %w", err)
	}
	tmpl, err := os.ReadFile(filepath.Join(s.moduleDir, "config", "docker.yaml"))
	if err != nil {
		return fmt.Errorf("the server's config template: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, "config", "docker.yaml"), tmpl, 0o644); err != nil {
		return fmt.Errorf("temporal-server's config: %w", err)
	}
	deployed, err := os.ReadFile(filepath.Join(s.root, "deploy", "temporal", "dynamicconfig.yaml"))
	if err != nil {
		return fmt.Errorf("deploy's dynamic config: %w", err)
	}
	dyn := filepath.Join(root, "dynamicconfig.yaml")
	if err := os.WriteFile(dyn, dynamicConfig(deployed), 0o644); err != nil {
		return fmt.Errorf("temporal-server's dynamic config: %w", err)
	}
	service, err := composeEnvironment(ctx, s.root, s.o.ComposeEnv)
	if err != nil {
		return err
	}
	p, err := pickPorts()
	if err != nil {
		return err
	}
	env := environment(baseEnv(), service, settings{pg: s.pg, temporalDB: s.dbs[DBTemporal], visibilityDB: s.dbs[DBVisibility], dynamicConfig: dyn, ports: p})
	s.frontend = fmt.Sprintf("127.0.0.1:%d", p.frontend)
	s.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", p.metrics)

	started := time.Now()
	cmd := exec.Command(s.bins.Server, "--root", root, "--config", "config", "--env", "docker", "--allow-no-auth", "start")
	cmd.Env = env
	var out io.Writer = s.out
	if s.o.Out != nil {
		out = io.MultiWriter(s.out, s.o.Out)
	}
	out, bindFailed := devlaunch.WatchBind(out)
	cmd.Stdout, cmd.Stderr = out, out
	// The server dies with its caller, even a SIGKILLed one or a test
	// binary that timed out: no orphan keeps the ports and the databases.
	if s.proc, err = devlaunch.StartChild(cmd, devlaunch.ChildOptions{DieWithParent: true}); err != nil {
		return fmt.Errorf("start temporal-server (%s): %w", s.bins.Server, err)
	}
	co, err := temporalx.Options(config.Temporal{Address: s.frontend, Namespace: "temporal-system"}, zerolog.Nop())
	if err != nil {
		return fmt.Errorf("a client of temporal-server's frontend: %w", err)
	}
	c, err := client.NewLazyClient(co)
	if err != nil {
		return fmt.Errorf("a client of temporal-server's frontend: %w", err)
	}
	defer c.Close()
	deadline := time.Now().Add(ReadyTimeout)
	for {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.CheckHealth(hctx, &client.CheckHealthRequest{})
		cancel()
		if err == nil {
			break
		}
		select {
		case <-s.proc.Done():
			err := fmt.Errorf("temporal-server exited before its frontend answered (%v):\n%s", s.proc.ExitErr(), s.Output(40))
			if bindFailed() {
				err = fmt.Errorf("%w: %w", devlaunch.ErrAddressInUse, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("temporal-server was starting: %w", ctx.Err())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("temporal-server's frontend on %s did not answer a health check within %v: %w\n%s", s.frontend, ReadyTimeout, err, s.Output(40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.logf("temporal-server %s on PostgreSQL answered on %s after %v", Version, s.frontend, time.Since(started).Round(time.Millisecond))
	return nil
}

// Frontend is the frontend's gRPC address (host:port).
func (s *Server) Frontend() string { return s.frontend }

// MetricsURL is the server's Prometheus endpoint, for reading what it
// counts (eager activity dispatch, for one).
func (s *Server) MetricsURL() string { return s.metrics }

// Pid is the server process's id, for a bench that reads its CPU time.
func (s *Server) Pid() int { return s.proc.Pid() }

// Done is closed once the server has exited, whoever stopped it.
func (s *Server) Done() <-chan struct{} { return s.proc.Done() }

// ExitErr is why the server exited, once Done is closed; nil before.
func (s *Server) ExitErr() error { return s.proc.ExitErr() }

// Version is the server's release ("temporal-server v1.29.1"), for a
// report to say what it measured.
func (s *Server) Version() string { return "temporal-server " + Version }

// PostgresVersion is the PostgreSQL server's version, as it reports it.
func (s *Server) PostgresVersion() string { return s.pgVersion }

// PostgresPid is the PostgreSQL postmaster's process id when it runs on
// this machine (the parent of this server's own connection), for a bench
// that counts what the store costs beside temporal-server; 0 when it is
// elsewhere or cannot be read.
func (s *Server) PostgresPid() int { return s.pgPid }

// parentPid is pid's parent by /proc, or 0: a backend's postmaster, when
// PostgreSQL runs here.
func parentPid(pid int) int {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(rest))
			return ppid
		}
	}
	return 0
}

// Binaries are the server and SQL tool that run.
func (s *Server) Binaries() Binaries { return s.bins }

// SchemaOutput is what deploy/temporal/setup-schema.sh printed.
func (s *Server) SchemaOutput() string { return s.schemaOut }

// Output is the last n lines of the server's output (Tail).
func (s *Server) Output(n int) string { return Tail(s.out.String(), n) }

// Database is the name of the database of a role (DBTemporal,
// DBVisibility, or one of Options.ExtraDatabases); "" for another.
func (s *Server) Database(role string) string { return s.dbs[role] }

// DSN is Options.Postgres with its database replaced by the role's.
func (s *Server) DSN(role string) string {
	u := *s.pg
	u.Path = "/" + s.dbs[role]
	return u.String()
}

// Close kills the server and waits for it, drops this run's databases and
// removes the directory Start made. It is safe to call after a failed
// Start's own Close, and returns every step's error.
func (s *Server) Close() error {
	var errs []error
	if s.proc != nil {
		if err := s.proc.Kill(killWait); err != nil {
			errs = append(errs, fmt.Errorf("stop temporal-server: %w", err))
		}
	}
	if s.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for _, db := range s.dbs {
			if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
				errs = append(errs, fmt.Errorf("drop database %s: %w", db, err))
			}
		}
		cancel()
		errs = append(errs, s.admin.Close())
		s.admin = nil
	}
	if s.ownDir {
		errs = append(errs, os.RemoveAll(s.dir))
		s.ownDir = false
	}
	return errors.Join(errs...)
}

func (s *Server) logf(format string, args ...any) {
	if s.o.Logf != nil {
		s.o.Logf(format, args...)
	}
}
