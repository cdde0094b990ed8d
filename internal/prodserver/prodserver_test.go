package prodserver

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/meshroll/meshroll/internal/temporalcli"
)

// effective is env as a process sees it: the last value of each key wins,
// as exec.Cmd passes duplicates.
func effective(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// The server's environment is the compose service's, with this machine's
// addresses, ports, credentials and databases in place of the compose
// network's; what the service sets and Start does not is kept.
func TestEnvironment(t *testing.T) {
	pg, err := url.Parse("postgres://meshroll:s3cret@127.0.0.1:5433/postgres?sslmode=disable")
	require.NoError(t, err)
	noPort, err := url.Parse("postgres://meshroll:s3cret@db.example/postgres")
	require.NoError(t, err)
	p := ports{frontend: 41001, frontendHTTP: 41002, frontendMembership: 21001, history: 41003, historyMembership: 21002,
		matching: 41004, matchingMembership: 21003, worker: 41005, workerMembership: 21004, metrics: 41006}
	service := map[string]string{
		"DB": "postgres12", "DB_PORT": "5432", "POSTGRES_SEEDS": "postgres", "POSTGRES_USER": "meshroll",
		"POSTGRES_PWD": "compose-pw", "DBNAME": "temporal", "VISIBILITY_DBNAME": "temporal_visibility",
		"DYNAMIC_CONFIG_FILE_PATH": "/etc/temporal/config/dynamicconfig/meshroll.yaml",
	}
	base := []string{"PATH=/usr/bin", "DB=from-the-caller", "HOME=/root"}
	cases := []struct {
		name string
		pg   *url.URL
		want map[string]string
	}{
		{"the service's, overridden for this machine", pg, map[string]string{
			"PATH": "/usr/bin", "HOME": "/root", // the caller's
			"DB":             "postgres12", // the service's, over the caller's
			"POSTGRES_SEEDS": "127.0.0.1", "DB_PORT": "5433", "POSTGRES_PORT": "5433",
			"POSTGRES_USER": "meshroll", "POSTGRES_PWD": "s3cret",
			"DBNAME": "prod_temporal_x", "VISIBILITY_DBNAME": "prod_visibility_x",
			"DYNAMIC_CONFIG_FILE_PATH": "/run/dyn.yaml", "BIND_ON_IP": "127.0.0.1", "LOG_LEVEL": "warn",
			"FRONTEND_GRPC_PORT": "41001", "FRONTEND_HTTP_PORT": "41002", "FRONTEND_MEMBERSHIP_PORT": "21001",
			"HISTORY_GRPC_PORT": "41003", "HISTORY_MEMBERSHIP_PORT": "21002",
			"MATCHING_GRPC_PORT": "41004", "MATCHING_MEMBERSHIP_PORT": "21003",
			"WORKER_GRPC_PORT": "41005", "WORKER_MEMBERSHIP_PORT": "21004",
			"PROMETHEUS_ENDPOINT": "127.0.0.1:41006",
		}},
		{"a DSN without a port is PostgreSQL's default", noPort, map[string]string{
			"POSTGRES_SEEDS": "db.example", "DB_PORT": "5432", "POSTGRES_PORT": "5432",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := effective(environment(base, service, settings{pg: tc.pg, temporalDB: "prod_temporal_x", visibilityDB: "prod_visibility_x", dynamicConfig: "/run/dyn.yaml", ports: p}))
			for k, v := range tc.want {
				assert.Equal(t, v, env[k], k)
			}
		})
	}
}

// The compose file's temporal service is read from the repository, the
// caller's working directory anywhere in it: its database driver is kept,
// and the secret it needs is interpolated from ComposeEnv (placeholders
// when nil).
func TestComposeEnvironment(t *testing.T) {
	root, err := FindRoot(".")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		env    map[string]string
		wantPw string
	}{
		{"placeholders", nil, placeholderComposeEnv["POSTGRES_PASSWORD"]},
		{"an operator's .env", map[string]string{"POSTGRES_PASSWORD": "pw", "MESHROLL_HOST_TOKEN": "tok"}, "pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := composeEnvironment(t.Context(), root, tc.env)
			require.NoError(t, err)
			assert.Equal(t, "postgres12", svc["DB"])
			assert.Equal(t, tc.wantPw, svc["POSTGRES_PWD"])
			assert.NotEmpty(t, svc["DYNAMIC_CONFIG_FILE_PATH"])
		})
	}
	_, err = composeEnvironment(t.Context(), root, map[string]string{"MESHROLL_HOST_TOKEN": "tok"})
	require.Error(t, err, "without POSTGRES_PASSWORD the compose file does not load")
	assert.Contains(t, err.Error(), "POSTGRES_PASSWORD")
}

// Membership ports are below 32768 (a PostgreSQL smallint) and at or
// above lowPortMin, whatever the random bytes.
func TestLowPortRange(t *testing.T) {
	for _, b := range [][2]byte{{0, 0}, {0, 255}, {255, 255}, {255, 0}, {46, 224}, {47, 0}, {128, 128}} {
		port := lowPortFrom(b)
		assert.GreaterOrEqual(t, port, lowPortMin, "%v", b)
		assert.Less(t, port, 32768, "%v", b)
	}
	port, err := lowPort()
	require.NoError(t, err)
	assert.Less(t, port, 32768)
}

// deploy's dynamic config with the one-partition addition is still one
// YAML mapping, with deploy's keys and the addition's: deploy naming a
// partition key itself would make it a duplicate key, which the server
// refuses.
func TestDynamicConfig(t *testing.T) {
	root, err := FindRoot(".")
	require.NoError(t, err)
	deployed, err := os.ReadFile(filepath.Join(root, "deploy", "temporal", "dynamicconfig.yaml"))
	require.NoError(t, err)
	for _, in := range [][]byte{deployed, []byte(strings.TrimRight(string(deployed), "\n"))} {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(dynamicConfig(in), &m))
		assert.Contains(t, m, "system.enableActivityEagerExecution")
		assert.Contains(t, m, "matching.numTaskqueueReadPartitions")
		assert.Contains(t, m, "matching.numTaskqueueWritePartitions")
	}
}

// FindRoot walks up to this module's go.mod, and only this module's.
func TestFindRoot(t *testing.T) {
	mine := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mine, "go.mod"), []byte("module "+repoModule+"\n\ngo 1.26\n"), 0o644))
	nested := filepath.Join(mine, "testsuite", "deep")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644))

	for _, tc := range []struct {
		name, from, want string
	}{
		{"the root itself", mine, mine},
		{"below the root", nested, mine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindRoot(tc.from)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := FindRoot(other)
	require.Error(t, err)
	assert.Contains(t, err.Error(), repoModule)
}

// No binary of the wanted version among the candidates is ErrNotInstalled,
// naming the install script and the variable.
func TestFindBinariesNotInstalled(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "temporal-server")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755))
	self, err := os.Executable() // a Go binary, but not the server
	require.NoError(t, err)
	_, err = findBinaries([]string{fake, self, filepath.Join(dir, "missing")})
	require.True(t, errors.Is(err, ErrNotInstalled), "%v", err)
	assert.Contains(t, err.Error(), "scripts/install-temporal-server.sh")
	assert.Contains(t, err.Error(), ServerEnv)
}

// Tail keeps the last lines and cuts each long one.
func TestTail(t *testing.T) {
	long := strings.Repeat("x", 400)
	for _, tc := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"fewer lines than asked", "a\nb\n", 5, "a\nb"},
		{"the last n", "a\nb\nc\nd\n", 2, "c\nd"},
		{"a long line cut", "a\n" + long, 1, strings.Repeat("x", 300) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Tail(tc.in, tc.n))
		})
	}
}

// Start runs the server on fresh databases, starting again on other ports
// when one it picked was taken before the server bound it,
// RegisterNamespace registers a namespace on it, and Close leaves neither
// the process nor a database behind. It needs what the production test
// needs, and skips without it (the production test is the one CI insists
// on).
func TestStartAndClose(t *testing.T) {
	if testing.Short() {
		t.Skip("starts temporal-server")
	}
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		t.Skip("MESHROLL_TEST_POSTGRES_DSN is not set (scripts/postgres-test.sh)")
	}
	bins, err := FindBinaries(t.Context())
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	require.NoError(t, err)
	// The first start's frontend port is one this test holds, as another
	// program on the box might take it between the pick and the bind.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = taken.Close() }()
	picks := 0
	pickPorts = func() (ports, error) {
		picks++
		p, err := freePorts()
		if picks == 1 {
			p.frontend = taken.Addr().(*net.TCPAddr).Port
		}
		return p, err
	}
	t.Cleanup(func() { pickPorts = freePorts })
	var logged []string
	s, err := Start(t.Context(), Options{Postgres: dsn, Binaries: bins, ExtraDatabases: []string{"extra"},
		Logf: func(format string, args ...any) {
			logged = append(logged, fmt.Sprintf(format, args...))
			t.Logf(format, args...)
		}})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = s.Close()
		}
	})
	require.Len(t, logged, 3, "a line for the schema, one for the taken port and one for the server: %q", logged)
	assert.Contains(t, logged[1], "attempt 1 of")
	assert.Equal(t, 2, picks, "started again on fresh ports once")
	assert.Contains(t, s.SchemaOutput(), "setup-schema: done")
	dbs := []string{s.Database(DBTemporal), s.Database(DBVisibility), s.Database("extra")}
	for _, db := range dbs {
		assert.True(t, strings.HasPrefix(db, "prod_"), db)
	}
	assert.Contains(t, s.DSN("extra"), "/"+s.Database("extra"))

	resp, err := http.Get(s.MetricsURL())
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the Prometheus endpoint answers")

	if err := s.RegisterNamespace(t.Context(), "prodserver-test"); errors.Is(err, temporalcli.ErrNotFound) {
		t.Logf("namespace not registered: %v", err)
	} else {
		require.NoError(t, err)
	}

	pid := s.Pid()
	require.NoError(t, s.Close())
	closed = true
	select {
	case <-s.Done():
	default:
		t.Fatal("Close returned before temporal-server exited")
	}
	assert.Error(t, syscall.Kill(pid, 0), "temporal-server (pid %d) is gone", pid)
	admin, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer func() { _ = admin.Close() }()
	var left int
	require.NoError(t, admin.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", dbs).Scan(&left))
	assert.Zero(t, left, "Close dropped %v", dbs)
}
