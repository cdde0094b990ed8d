// Command host is meshroll's host agent: it serves a machine's host API
// (report, declarations, journal, health; see packages host and agent) and
// runs what the machine workflow declares. It keeps its journal and
// checkpoint in a state directory, so a restarted agent picks up where it
// was.
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
// Exit codes: 0 stopped cleanly (SIGINT, SIGTERM), 1 error, 2 usage.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/secret"
)

// envPrefix prefixes every variable the agent reads.
const envPrefix = "MESHROLL_HOST"

// shutdownGrace bounds how long a stop waits for requests in flight.
const shutdownGrace = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a mistake in how the agent was invoked: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

type settings struct {
	listen, machine, state, token, runtime string
	tlsCert, tlsKey, dockerSocket          string
	startDelay                             time.Duration
	logLevel, logFormat                    string
	metrics                                bool
	// registry is for the exec runtime's pulls; its password is secret.
	registry                registry.Options
	stopGrace, healthyAfter time.Duration
}

// keys maps each configuration key to its flag.
var keys = map[string]string{
	"listen":             "listen",
	"machine":            "machine",
	"state":              "state",
	"token":              "token",
	"token_file":         "token-file",
	"tls_cert":           "tls-cert",
	"tls_key":            "tls-key",
	"runtime":            "runtime",
	"docker_socket":      "docker-socket",
	"noop_start_delay":   "noop-start-delay",
	"registry":           "registry",
	"registry_username":  "registry-username",
	"registry_password":  "registry-password",
	"registry_insecure":  "registry-insecure",
	"registry_ca_file":   "registry-ca-file",
	"exec_stop_grace":    "exec-stop-grace",
	"exec_healthy_after": "exec-healthy-after",
	"metrics":            "metrics",
	"log_level":          "log-level",
	"log_format":         "log-format",
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	s, err := load(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, err)
	}
	log, err := logging.New(stderr, s.logLevel, s.logFormat)
	if err != nil {
		return fail(stderr, usageError{err})
	}
	rt, err := agent.NewRuntime(s.runtime, agent.RuntimeOptions{
		StartDelay: s.startDelay, Machine: s.machine, DockerSocket: s.dockerSocket,
		StateDir: s.state, Registry: s.registry, StopGrace: s.stopGrace, HealthyAfter: s.healthyAfter,
	})
	if errors.Is(err, agent.ErrUnknownRuntime) {
		return fail(stderr, usageError{err})
	}
	if err != nil {
		return fail(stderr, err)
	}

	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fail(stderr, fmt.Errorf("address %s is already in use (another agent?); choose another with --listen", s.listen))
		}
		return fail(stderr, fmt.Errorf("listen on %s: %w", s.listen, err))
	}
	a, err := agent.Open(ctx, agent.Options{Machine: s.machine, StateDir: s.state, Runtime: rt, Log: log})
	if err != nil {
		_ = ln.Close()
		return fail(stderr, err)
	}
	srv := agent.NewServerWith(a, agent.HandlerOptions{Token: s.token, NoMetrics: !s.metrics})
	if s.token == "" {
		log.Warn().Str("address", ln.Addr().String()).Msg("no token configured: anyone who can reach the address can declare containers")
	}
	if s.runtime == agent.RuntimeNoop {
		log.Warn().Msg("runtime noop runs nothing: declared containers are reported running without running; it is for trying meshroll without images")
	}
	if s.runtime == agent.RuntimeExec {
		// Never the password: only whether there is one.
		log.Info().Str("registry", s.registry.Address).Str("registry_username", s.registry.Username).
			Bool("registry_password", s.registry.Password != "").Bool("registry_insecure", s.registry.Insecure).
			Str("registry_ca_file", s.registry.CAFile).Msg("runtime exec pulls images by digest and runs their entrypoints as child processes")
	} else if s.registry != (registry.Options{}) {
		log.Warn().Str("runtime", s.runtime).Msg("registry options are only used by --runtime exec")
	}
	log.Info().Str("address", ln.Addr().String()).Str("machine", s.machine).Str("state_dir", s.state).
		Str("runtime", rt.Name()).Bool("auth", s.token != "").Bool("tls", s.tlsCert != "").Bool("metrics", s.metrics).Msg("host agent listening")

	if s.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			_ = ln.Close()
			_ = a.Close(ctx)
			return fail(stderr, fmt.Errorf("tls certificate: %w", err))
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("stopping")
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("requests still in flight at shutdown")
	}
	closeErr := a.Close(sctx)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fail(stderr, fmt.Errorf("serve on %s: %w", ln.Addr(), serveErr))
	}
	if closeErr != nil {
		return fail(stderr, closeErr)
	}
	log.Info().Msg("host agent stopped")
	return 0
}

// fail prints err as one line and gives its exit code.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "host:", err)
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// load reads flags, environment and config file, flags first.
func load(args []string, stderr io.Writer) (settings, error) {
	fs := pflag.NewFlagSet("host", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: host --machine NAME [flags]\n\nmeshroll's host agent. Every flag is also %s_<FLAG> (dashes as underscores)\nand a key of the --config file (dashes as underscores).\n\n", envPrefix)
		fs.PrintDefaults()
	}
	configFlag := fs.String("config", "", "YAML file with settings (default $"+envPrefix+"_CONFIG)")
	fs.String("listen", "127.0.0.1:7400", "address to serve the host API on")
	fs.String("machine", "", "machine this agent answers for (required)")
	fs.String("state", "", "state directory (default .meshroll/hosts/<machine>)")
	fs.String("token", "", "bearer token the API requires (prefer "+envPrefix+"_TOKEN: flags show in ps)")
	fs.String("token-file", "", "file holding the bearer token (the safest place for it)")
	fs.String("tls-cert", "", "PEM certificate to serve TLS with (with --tls-key)")
	fs.String("tls-key", "", "PEM private key of --tls-cert")
	fs.String("runtime", agent.RuntimeNoop, "runtime: noop (runs nothing, for trying meshroll without images), exec (pulls images by digest and runs their entrypoints as child processes) or docker (Docker Engine API; Podman's compatible service works)")
	fs.String("docker-socket", agent.DefaultDockerSocket, "the Docker engine's unix socket, for --runtime docker")
	fs.Duration("noop-start-delay", 0, "how long the noop runtime reports a container starting before running")
	fs.String("registry", "", "OCI registry host[:port] (or http(s)://host[:port]) the exec runtime authenticates pulls from; images elsewhere are pulled anonymously")
	fs.String("registry-username", "", "user for --registry")
	fs.String("registry-password", "", "password for --registry (prefer "+envPrefix+"_REGISTRY_PASSWORD: flags show in ps)")
	fs.Bool("registry-insecure", false, "allow plain HTTP to --registry")
	fs.String("registry-ca-file", "", "PEM bundle to trust for registries besides the system roots")
	fs.Duration("exec-stop-grace", 0, "how long the exec runtime gives a process between SIGTERM and SIGKILL (default 10s)")
	fs.Duration("exec-healthy-after", 0, "how long an exec process must stay up to count as running (default 1s)")
	fs.Bool("metrics", true, "serve Prometheus metrics on "+agent.PathMetrics+" (unauthenticated, read-only, no secrets)")
	fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.String("log-format", logging.FormatAuto, "log format: json, console, auto (console on a terminal)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return settings{}, err
		}
		return settings{}, usageError{err}
	}
	if fs.NArg() > 0 {
		return settings{}, usagef("unexpected arguments %q", fs.Args())
	}

	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.AutomaticEnv()
	for key, flag := range keys {
		if err := v.BindPFlag(key, fs.Lookup(flag)); err != nil {
			return settings{}, fmt.Errorf("bind flag --%s: %w", flag, err)
		}
	}
	path := *configFlag
	if path == "" {
		path = os.Getenv(envPrefix + "_CONFIG")
	}
	if path != "" {
		v.SetConfigFile(path)
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" && ext != ".json" && ext != ".toml" {
			v.SetConfigType("yaml")
		}
		if err := v.ReadInConfig(); err != nil {
			return settings{}, fmt.Errorf("read config %s: %w", path, err)
		}
		var unknown []string
		for _, k := range v.AllKeys() {
			if _, ok := keys[k]; !ok {
				unknown = append(unknown, k)
			}
		}
		if unknown != nil {
			slices.Sort(unknown)
			known := slices.Sorted(func(yield func(string) bool) {
				for k := range keys {
					if !yield(k) {
						return
					}
				}
			})
			return settings{}, usagef("config %s: unknown keys %s (known: %s)", path, strings.Join(unknown, ", "), strings.Join(known, ", "))
		}
	}

	s := settings{
		listen:    strings.TrimSpace(v.GetString("listen")),
		machine:   strings.TrimSpace(v.GetString("machine")),
		state:     strings.TrimSpace(v.GetString("state")),
		token:     v.GetString("token"),
		runtime:   strings.TrimSpace(v.GetString("runtime")),
		logLevel:  v.GetString("log_level"),
		logFormat: v.GetString("log_format"),
		tlsCert:   strings.TrimSpace(v.GetString("tls_cert")),
		tlsKey:    strings.TrimSpace(v.GetString("tls_key")),

		dockerSocket: strings.TrimSpace(v.GetString("docker_socket")),

		registry: registry.Options{
			Address:  strings.TrimSpace(v.GetString("registry")),
			Username: strings.TrimSpace(v.GetString("registry_username")),
			Password: secret.String(v.GetString("registry_password")),
			Insecure: v.GetBool("registry_insecure"),
			CAFile:   strings.TrimSpace(v.GetString("registry_ca_file")),
		},
	}
	if f := strings.TrimSpace(v.GetString("token_file")); f != "" {
		if s.token != "" {
			return settings{}, usagef("give the token either directly or as a file, not both")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return settings{}, fmt.Errorf("token file: %w", err)
		}
		if s.token = strings.TrimSpace(string(b)); s.token == "" {
			return settings{}, fmt.Errorf("token file %s is empty", f)
		}
	}
	// Strictly: viper reads "maybe" as false, which would turn metrics off
	// without a word.
	if m := strings.TrimSpace(v.GetString("metrics")); m != "" {
		b, err := strconv.ParseBool(m)
		if err != nil {
			return settings{}, usagef("--metrics %q: want true or false", m)
		}
		s.metrics = b
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return settings{}, usagef("--tls-cert and --tls-key go together")
	}
	if d := strings.TrimSpace(v.GetString("noop_start_delay")); d != "" {
		var err error
		if s.startDelay, err = time.ParseDuration(d); err != nil || s.startDelay < 0 {
			return settings{}, usagef("noop start delay %q: want a duration of 0 or more, like 2s", d)
		}
	}
	for key, d := range map[string]*time.Duration{"exec_stop_grace": &s.stopGrace, "exec_healthy_after": &s.healthyAfter} {
		if str := strings.TrimSpace(v.GetString(key)); str != "" {
			var err error
			if *d, err = time.ParseDuration(str); err != nil || *d < 0 {
				return settings{}, usagef("--%s %q: want a duration of 0 (the default) or more, like 10s", keys[key], str)
			}
		}
	}
	if s.registry.Address != "" {
		// Errors of package registry never carry the password.
		if _, err := s.registry.Host(); err != nil {
			return settings{}, usageError{fmt.Errorf("--registry: %w", err)}
		}
	} else if s.registry.Username != "" || s.registry.Password != "" {
		return settings{}, usagef("--registry-username and --registry-password need --registry")
	}
	if _, err := s.registry.Authenticator(); err != nil {
		return settings{}, usageError{err}
	}
	if s.machine == "" {
		return settings{}, usagef("--machine is required (or %s_MACHINE, or machine: in the config file)", envPrefix)
	}
	if err := mesh.ValidName("machine", s.machine); err != nil {
		return settings{}, usageError{err}
	}
	if s.state == "" {
		s.state = filepath.Join(".meshroll", "hosts", s.machine)
	}
	if s.listen == "" {
		return settings{}, usagef("--listen is empty")
	}
	for _, r := range s.token {
		if r < 0x21 || r == 0x7f {
			// Never echo the token.
			return settings{}, usagef("token contains spaces or control characters, which no client can send")
		}
	}
	return s, nil
}
