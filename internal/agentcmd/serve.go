package agentcmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/cmdrun"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/secret"
)

// shutdownGrace bounds how long a stop waits for requests in flight.
const shutdownGrace = 10 * time.Second

// serve opens the agent s describes and serves its host API until ctx
// ends, logging to stderr.
func serve(ctx context.Context, s settings, stderr io.Writer) error {
	log, err := logging.New(stderr, s.logLevel, s.logFormat)
	if err != nil {
		return cmdrun.Usage(err)
	}
	rt, err := agent.NewRuntime(s.runtime, agent.RuntimeOptions{
		StartDelay: s.startDelay, Machine: s.machine, DockerSocket: s.dockerSocket,
		StateDir: s.state, Registry: s.registry, StopGrace: s.stopGrace, HealthyAfter: s.healthyAfter,
	})
	if errors.Is(err, agent.ErrUnknownRuntime) {
		return cmdrun.Usage(err)
	}
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("address %s is already in use (another agent?); choose another with --listen", s.listen)
		}
		return fmt.Errorf("listen on %s: %w", s.listen, err)
	}
	a, err := agent.Open(ctx, agent.Options{Machine: s.machine, StateDir: s.state, Runtime: rt, Log: log, Ports: s.ports})
	if err != nil {
		_ = ln.Close()
		return err
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
	} else if s.runtime == agent.RuntimeDocker && s.registry.Address != "" {
		log.Info().Str("registry", s.registry.Address).Str("registry_username", s.registry.Username).
			Bool("registry_password", s.registry.Password != "").Msg("runtime docker passes the registry's credentials to the engine when it pulls its images")
	} else if s.registry != (registry.Options{}) {
		log.Warn().Str("runtime", s.runtime).Msg("registry options are only used by --runtime exec and docker")
	}
	log.Info().Str("address", ln.Addr().String()).Str("machine", s.machine).Str("state_dir", s.state).
		Str("runtime", rt.Name()).Bool("auth", s.token != "").Bool("tls", s.tlsCert != "").Bool("metrics", s.metrics).Msg("host agent listening")

	if s.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			_ = ln.Close()
			_ = a.Close(ctx)
			return fmt.Errorf("tls certificate: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopEnrolling := startEnrolling(ctx, s, ln.Addr().String(), log)
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("stopping")
	case serveErr = <-served:
	}
	stopEnrolling()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("requests still in flight at shutdown")
	}
	closeErr := a.Close(sctx)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", ln.Addr(), serveErr)
	}
	if closeErr != nil {
		return closeErr
	}
	log.Info().Msg("host agent stopped")
	return nil
}

// startEnrolling asks s.enroll to let the machine in, if it is set, in the
// background: the agent serves whatever the answer, since nothing is pushed
// to it until it is admitted. The returned func stops asking and returns
// once the asking has ended.
func startEnrolling(ctx context.Context, s settings, bound string, log zerolog.Logger) (stop func()) {
	if s.enroll == "" {
		return func() {}
	}
	advertise := s.advertise
	if advertise == "" {
		advertise = advertiseURL(s.listen, bound, s.tlsCert != "")
	}
	c := enroll.Client{URL: s.enroll, Token: secret.String(s.enrollToken)}
	ask := enroll.Ask{Machine: s.machine, Host: advertise, Labels: s.labels}
	log.Info().Str("machine", s.machine).Str("advertise", advertise).Any("labels", s.labels).
		Str("enroll_every", s.enrollEvery.String()).Msg("asking the worker to enroll this machine")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Follow logs each answer; the agent serves whatever it is.
		_, _ = c.Follow(ctx, ask, s.enrollEvery, log)
	}()
	return func() {
		cancel()
		<-done
	}
}
