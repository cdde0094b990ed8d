package workerapp

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/fleetwatch"
	"github.com/meshroll/meshroll/internal/host"
)

// hostWatch is the worker's watcher of every host of the mesh config
// (package fleetwatch), kept in the catalogue that the starter and the
// fleet page read the hosts from.
type hostWatch struct {
	w      *fleetwatch.Watcher
	cat    catalogue.Catalogue
	broken map[string]error // machines with no client (a bad ca_file)
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newHostWatch watches cfg's machines into cat.
func newHostWatch(cfg *config.Config, cat catalogue.Catalogue, log zerolog.Logger) *hostWatch {
	hw := &hostWatch{cat: cat, broken: map[string]error{}, w: &fleetwatch.Watcher{
		Hosts: map[string]host.ReportWaiter{}, Store: cat,
		Log: log.With().Str("component", "fleet-watch").Logger(),
	}}
	for name, m := range cfg.Machines {
		c, err := m.HostClient()
		if err != nil {
			hw.broken[name] = err
			continue
		}
		hw.w.Hosts[name] = c
	}
	return hw
}

// start begins watching; stop ends it.
func (hw *hostWatch) start() {
	ctx, cancel := context.WithCancel(context.Background())
	hw.cancel = cancel
	for name, err := range hw.broken {
		if rerr := hw.cat.RecordHostError(ctx, name, err.Error(), time.Now()); rerr != nil {
			hw.w.Log.Error().Err(rerr).Str("machine", name).Msg("recording the host's error failed")
		}
	}
	hw.done.Go(func() { hw.w.Run(ctx) })
}

func (hw *hostWatch) stop() {
	if hw.cancel != nil {
		hw.cancel()
		hw.done.Wait()
	}
}
