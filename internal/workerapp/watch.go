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
	cat catalogue.Catalogue
	log zerolog.Logger

	mu     sync.Mutex // start, stop and follow one at a time
	w      *fleetwatch.Watcher
	broken map[string]error // machines with no client (a bad ca_file)
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newHostWatch watches cfg's machines into cat.
func newHostWatch(cfg *config.Config, cat catalogue.Catalogue, log zerolog.Logger) *hostWatch {
	hw := &hostWatch{cat: cat, log: log.With().Str("component", "fleet-watch").Logger()}
	hw.hosts(cfg)
	return hw
}

// hosts makes the watcher of cfg's machines, not yet started.
func (hw *hostWatch) hosts(cfg *config.Config) {
	hw.broken = map[string]error{}
	hw.w = &fleetwatch.Watcher{Hosts: map[string]host.ReportWaiter{}, Store: hw.cat, Log: hw.log}
	for name, m := range cfg.Machines {
		c, err := m.HostClient()
		if err != nil {
			hw.broken[name] = err
			continue
		}
		hw.w.Hosts[name] = c
	}
}

// follow watches cfg's machines from now on: the hosts of a mesh config
// that changed while the worker runs.
func (hw *hostWatch) follow(cfg *config.Config) {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	hw.stopLocked()
	hw.hosts(cfg)
	hw.startLocked()
}

// start begins watching; stop ends it.
func (hw *hostWatch) start() {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	hw.startLocked()
}

func (hw *hostWatch) stop() {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	hw.stopLocked()
}

func (hw *hostWatch) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	hw.cancel = cancel
	for name, err := range hw.broken {
		if rerr := hw.cat.RecordHostError(ctx, name, err.Error(), time.Now()); rerr != nil {
			hw.log.Error().Err(rerr).Str("machine", name).Msg("recording the host's error failed")
		}
	}
	w := hw.w
	hw.done.Go(func() { w.Run(ctx) })
}

func (hw *hostWatch) stopLocked() {
	if hw.cancel != nil {
		hw.cancel()
		hw.done.Wait()
		hw.cancel = nil
	}
}
