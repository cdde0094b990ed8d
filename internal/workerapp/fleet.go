package workerapp

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/fleetui"
	"github.com/meshroll/meshroll/internal/machinefeed"
	"github.com/meshroll/meshroll/internal/machines"
)

// ServeFleet serves the fleet page (package fleetui) on
// the config's worker.ui_listen, reading the fleet through the worker's own
// client, config in force and catalogue, and returns the address it listens on and what
// stops it. The worker's command and the dev stack both serve it through
// here, so the dev stack's page is the deployed one.
func ServeFleet(c client.Client, mesh config.Source, cat catalogue.Catalogue, log zerolog.Logger) (net.Addr, func(context.Context) error, error) {
	cfg := mesh.Current()
	token, err := cfg.Worker.FleetToken()
	if err != nil {
		return nil, nil, err
	}
	log = log.With().Str("component", "fleet-page").Logger()
	// The page reads the machine workflows from the feed the worker keeps
	// in its catalogue (Workers), so that no viewer waits for a list of
	// every one.
	var feed machines.Feed
	if cat != nil {
		feed = machinefeed.Kept{Store: cat}
	}
	page, err := fleetui.New(fleetui.Options{
		Source: fleetui.Reader{Config: mesh, Client: c, Catalogue: cat, Feed: feed},
		Config: mesh, Token: token, Log: log,
	})
	if err != nil {
		return nil, nil, err
	}
	// A page waits for the fleet's first read, which reads the fleet
	// picture and (until the feed is kept) lists every machine workflow.
	return serve(cfg.Worker.UIListen, "worker.ui_listen", page, 2*time.Minute, log)
}

// serve serves h on addr (named by key in errors) until the returned
// function shuts it down, logging to log when it stops on its own.
func serve(addr, key string, h http.Handler, writeTimeout time.Duration, log zerolog.Logger) (net.Addr, func(context.Context) error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", key, addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      writeTimeout,
		ErrorLog:          stdlog.New(log, "", 0),
	}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("address", ln.Addr().String()).Msg("stopped serving")
		}
	}()
	return ln.Addr(), srv.Shutdown, nil
}
