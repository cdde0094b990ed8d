package workerapp

import (
	"context"
	"net"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/enroll"
)

// ServeEnroll serves the enrollment endpoint (package enroll) on
// cfg.Worker.EnrollListen: agents started with --enroll ask there, and
// their asks are kept as Enrollment workflows on the worker's task queue,
// pending until an operator decides. A name the mesh config in force
// (mesh) gives a machine of the file is refused. It returns the address
// it listens on and what stops it; the worker's command and the dev
// stack both serve it through here.
func ServeEnroll(c client.Client, mesh config.Source, log zerolog.Logger) (net.Addr, func(context.Context) error, error) {
	cfg := mesh.Current()
	token, err := cfg.Worker.EnrollKey()
	if err != nil {
		return nil, nil, err
	}
	log = log.With().Str("component", "enrollment").Logger()
	h, err := enroll.NewHandler(enroll.Options{
		Token:   token,
		Records: enroll.In(c, cfg),
		Named: func(machine string) (string, bool) {
			m, ok := mesh.Current().Machines[machine]
			return m.Host, ok && !m.Admitted
		},
		Log: log,
	})
	if err != nil {
		return nil, nil, err
	}
	return serve(cfg.Worker.EnrollListen, "worker.enroll_listen", h, 10*time.Second, log)
}

// admitted lists the machines admitted through enrollment, for the live
// config to put in force beside the file's; none, without asking, while
// the config in force has no enroll.modules (enrollment is off).
func admitted(c client.Client, mesh config.Source) func(context.Context) ([]config.Admitted, error) {
	return func(ctx context.Context) ([]config.Admitted, error) {
		cfg := mesh.Current()
		if len(cfg.Enroll.Modules) == 0 {
			return nil, nil
		}
		return enroll.In(c, cfg).Admitted(ctx)
	}
}
