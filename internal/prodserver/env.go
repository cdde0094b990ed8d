package prodserver

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
)

// composeService names docker-compose.yml's Temporal server service, whose
// environment Start runs temporal-server with.
const composeService = "temporal"

// placeholderComposeEnv stands in for an operator's .env when
// Options.ComposeEnv is nil: docker-compose.yml refuses to load without
// these secrets (deploy/compose.env.example). Of them, only
// POSTGRES_PASSWORD reaches the temporal service (as POSTGRES_PWD), and
// Start replaces that with Options.Postgres's password.
var placeholderComposeEnv = map[string]string{
	"POSTGRES_PASSWORD":   "unused-replaced-by-the-dsn-password",
	"MESHROLL_HOST_TOKEN": "unused-by-the-temporal-service",
}

// composeEnvironment is the environment docker-compose.yml gives its
// temporal service, loaded from root with the compose specification's own
// loader (what `docker compose config` runs), env interpolated into it.
// Variables set without a value are left out.
func composeEnvironment(ctx context.Context, root string, env map[string]string) (map[string]string, error) {
	if env == nil {
		env = placeholderComposeEnv
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		kv = append(kv, k+"="+env[k])
	}
	file := filepath.Join(root, "docker-compose.yml")
	opts, err := cli.NewProjectOptions([]string{file}, cli.WithWorkingDirectory(root), cli.WithEnv(kv), cli.WithProfiles([]string{"cli"}))
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", file, err)
	}
	proj, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("load %s (Options.ComposeEnv stands for its .env): %w", file, err)
	}
	svc, err := proj.GetService(composeService)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out := map[string]string{}
	for k, v := range svc.Environment {
		if v != nil {
			out[k] = *v
		}
	}
	return out, nil
}

// ports are temporal-server's listeners on loopback: each service's gRPC
// port and its membership (ringpop) port, the frontend's HTTP API and the
// Prometheus endpoint.
type ports struct {
	frontend, frontendHTTP, frontendMembership int
	history, historyMembership                 int
	matching, matchingMembership               int
	worker, workerMembership                   int
	metrics                                    int
}

// pickPorts picks the ports of a start; a variable so that a test can hand
// out a taken one.
var pickPorts = freePorts

// freePorts picks free loopback ports. The server stores membership ports
// as a PostgreSQL smallint, so they must be below 32768 (lowPort), where
// the kernel's ephemeral ports (freePort) are not.
func freePorts() (ports, error) {
	var p ports
	var err error
	for _, f := range []struct {
		port *int
		pick func() (int, error)
	}{
		{&p.frontend, freePort}, {&p.frontendHTTP, freePort}, {&p.frontendMembership, lowPort},
		{&p.history, freePort}, {&p.historyMembership, lowPort},
		{&p.matching, freePort}, {&p.matchingMembership, lowPort},
		{&p.worker, freePort}, {&p.workerMembership, lowPort},
		{&p.metrics, freePort},
	} {
		if *f.port, err = f.pick(); err != nil {
			return ports{}, err
		}
	}
	return p, nil
}

// freePort is a loopback port no one listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port for temporal-server: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Membership ports are picked in [lowPortMin, lowPortMin+lowPortSpan+255]:
// below 32768 (a smallint), above the well-known and registered ports
// services usually sit on.
const (
	lowPortMin  = 20000
	lowPortSpan = 12000
)

// lowPort is a loopback port below 32768 that is free when asked.
func lowPort() (int, error) {
	for range 200 {
		var b [2]byte
		_, _ = rand.Read(b[:])
		port := lowPortFrom(b)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			_ = l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port between %d and 32767 in 200 tries for temporal-server's membership", lowPortMin)
}

// lowPortFrom maps two random bytes into the membership ports' range.
func lowPortFrom(b [2]byte) int {
	return lowPortMin + int(b[0])<<8%lowPortSpan + int(b[1])
}

// settings are what Start changes in the compose service's environment to
// run it here: loopback addresses and free ports, the caller's PostgreSQL
// and this run's databases, and the dynamic config file written beside
// the config.
type settings struct {
	pg                       *url.URL
	temporalDB, visibilityDB string
	dynamicConfig            string
	ports                    ports
}

// environment is temporal-server's environment: base, then the compose
// service's (sorted, for a stable order), then s's, later entries winning
// (as exec.Cmd takes them), so that everything the service sets that s
// does not (DB=postgres12, ...) is the compose file's.
func environment(base []string, service map[string]string, s settings) []string {
	env := slices.Clone(base)
	for _, k := range slices.Sorted(maps.Keys(service)) {
		env = append(env, k+"="+service[k])
	}
	pw, _ := s.pg.User.Password()
	p := s.ports
	return append(env,
		"BIND_ON_IP=127.0.0.1", "LOG_LEVEL=warn", "DYNAMIC_CONFIG_FILE_PATH="+s.dynamicConfig,
		"POSTGRES_SEEDS="+s.pg.Hostname(), "DB_PORT="+pgPort(s.pg), "POSTGRES_PORT="+pgPort(s.pg),
		"POSTGRES_USER="+s.pg.User.Username(), "POSTGRES_PWD="+pw,
		"DBNAME="+s.temporalDB, "VISIBILITY_DBNAME="+s.visibilityDB,
		fmt.Sprintf("FRONTEND_GRPC_PORT=%d", p.frontend), fmt.Sprintf("FRONTEND_HTTP_PORT=%d", p.frontendHTTP),
		fmt.Sprintf("FRONTEND_MEMBERSHIP_PORT=%d", p.frontendMembership),
		fmt.Sprintf("HISTORY_GRPC_PORT=%d", p.history), fmt.Sprintf("HISTORY_MEMBERSHIP_PORT=%d", p.historyMembership),
		fmt.Sprintf("MATCHING_GRPC_PORT=%d", p.matching), fmt.Sprintf("MATCHING_MEMBERSHIP_PORT=%d", p.matchingMembership),
		fmt.Sprintf("WORKER_GRPC_PORT=%d", p.worker), fmt.Sprintf("WORKER_MEMBERSHIP_PORT=%d", p.workerMembership),
		fmt.Sprintf("PROMETHEUS_ENDPOINT=127.0.0.1:%d", p.metrics),
	)
}

// baseEnv is the caller's environment without its MESHROLL_* settings,
// which are meshroll's own (a developer's MESHROLL_TEMPORAL_ADDRESS, the
// tests' DSNs) and none of the server's or the scripts' business.
func baseEnv() []string {
	return withoutMeshroll(os.Environ())
}

func withoutMeshroll(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "MESHROLL_") {
			env = append(env, kv)
		}
	}
	return env
}

// pgPort is the DSN's port, PostgreSQL's default when it names none.
func pgPort(pg *url.URL) string {
	if port := pg.Port(); port != "" {
		return port
	}
	return "5432"
}

// DynamicConfig is added to deploy/temporal/dynamicconfig.yaml (the
// compose file's): task queues get one partition, as on the dev servers of
// the tests and the bench; on two cores it is what keeps a push round trip
// near a tenth of a second. It is exported so that a report can say what
// was run beside deploy/'s.
const DynamicConfig = `matching.numTaskqueueReadPartitions:
  - value: 1
matching.numTaskqueueWritePartitions:
  - value: 1
`

// dynamicConfig is deploy's dynamic config with DynamicConfig after it.
func dynamicConfig(deployed []byte) []byte {
	out := slices.Clone(deployed)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, DynamicConfig...)
}
