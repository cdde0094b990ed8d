// Command host is meshroll's host agent: it serves a machine's host API
// (report, declarations, journal, health; see packages host and agent) and
// runs what the machine workflow declares. It keeps its journal and
// checkpoint in a state directory, so a restarted agent picks up where it
// was.
//
//	go run ./host --machine edge-1 [--listen 127.0.0.1:7400] [--state DIR]
//	              [--token-file F] [--tls-cert F --tls-key F]
//	              [--runtime noop] [--config host.yaml]
//
// Every setting also comes from MESHROLL_HOST_<KEY> (MESHROLL_HOST_TOKEN,
// MESHROLL_HOST_LOG_LEVEL, ...) and from the YAML file given by --config (or
// MESHROLL_HOST_CONFIG), with keys named like the variables without the
// prefix (listen, machine, state, token, token_file, tls_cert, tls_key,
// runtime, noop_start_delay, log_level, log_format). A flag beats a
// variable, which beats the file.
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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/mesh"
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
}

// keys maps each configuration key to its flag.
var keys = map[string]string{
	"listen":           "listen",
	"machine":          "machine",
	"state":            "state",
	"token":            "token",
	"token_file":       "token-file",
	"tls_cert":         "tls-cert",
	"tls_key":          "tls-key",
	"runtime":          "runtime",
	"docker_socket":    "docker-socket",
	"noop_start_delay": "noop-start-delay",
	"log_level":        "log-level",
	"log_format":       "log-format",
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
	rt, err := agent.NewRuntime(s.runtime, agent.RuntimeOptions{StartDelay: s.startDelay, Machine: s.machine, DockerSocket: s.dockerSocket})
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
	srv := &http.Server{
		Handler:           agent.NewHandler(a, s.token),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	if s.token == "" {
		log.Warn().Str("address", ln.Addr().String()).Msg("no token configured: anyone who can reach the address can declare containers")
	}
	if s.runtime == agent.RuntimeNoop {
		log.Warn().Msg("runtime noop runs nothing: declared containers are reported running without running; it is for trying meshroll without images")
	}
	log.Info().Str("address", ln.Addr().String()).Str("machine", s.machine).Str("state_dir", s.state).
		Str("runtime", rt.Name()).Bool("auth", s.token != "").Bool("tls", s.tlsCert != "").Msg("host agent listening")

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
	fs.String("runtime", agent.RuntimeNoop, "runtime: noop (runs nothing, for trying meshroll without images), docker (Docker Engine API; Podman's compatible service works) or exec (needs images from an OCI registry: not available yet)")
	fs.String("docker-socket", agent.DefaultDockerSocket, "the Docker engine's unix socket, for --runtime docker")
	fs.Duration("noop-start-delay", 0, "how long the noop runtime reports a container starting before running")
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
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return settings{}, usagef("--tls-cert and --tls-key go together")
	}
	if d := strings.TrimSpace(v.GetString("noop_start_delay")); d != "" {
		var err error
		if s.startDelay, err = time.ParseDuration(d); err != nil || s.startDelay < 0 {
			return settings{}, usagef("noop start delay %q: want a duration of 0 or more, like 2s", d)
		}
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
