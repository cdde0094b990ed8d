package workerapp

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/fleetwatch"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/machinefeed"
)

// hostWatch is the worker's watcher of every host of the mesh config
// (package fleetwatch), kept in the catalogue that the starter and the
// fleet page read the hosts from.
type hostWatch struct {
	cat catalogue.Catalogue
	log zerolog.Logger
	w   *fleetwatch.Watcher

	mu     sync.Mutex // start and stop one at a time
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newHostWatch watches cfg's machines into cat.
func newHostWatch(cfg *config.Config, cat catalogue.Catalogue, log zerolog.Logger) *hostWatch {
	hw := &hostWatch{cat: cat, log: log.With().Str("component", "fleet-watch").Logger()}
	hw.w = &fleetwatch.Watcher{Hosts: map[string]host.ReportWaiter{}, Store: hw.cat, Log: hw.log}
	for _, name := range cfg.MachineNames() {
		hw.set(cfg, name)
	}
	return hw
}

// follow watches the hosts of a mesh config that changed while the worker
// runs: those of the machines that joined or moved start (again), those of
// the machines that left stop, and every other host's long poll goes on
// untouched, so that a machine admitted into a fleet of thousands costs
// one new watch, not thousands restarted.
func (hw *hostWatch) follow(cfg *config.Config, ch config.Change) {
	for _, name := range ch.Left {
		hw.w.Drop(name)
	}
	for _, name := range append(slices.Clone(ch.Joined), ch.Moved...) {
		hw.set(cfg, name)
	}
}

// set watches cfg's machine name, or, when it has no client (a bad
// ca_file), stops watching it and records why.
func (hw *hostWatch) set(cfg *config.Config, name string) {
	c, err := cfg.Machines[name].HostClient()
	if err == nil {
		hw.w.Set(name, c)
		return
	}
	hw.w.Drop(name)
	if rerr := hw.cat.RecordHostError(context.Background(), name, err.Error(), time.Now()); rerr != nil {
		hw.log.Error().Err(rerr).Str("machine", name).Msg("recording the host's error failed")
	}
}

// start begins watching; stop ends it.
func (hw *hostWatch) start() {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	hw.cancel = cancel
	hw.done.Go(func() { hw.w.Run(ctx) })
}

func (hw *hostWatch) stop() {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	if hw.cancel != nil {
		hw.cancel()
		hw.done.Wait()
		hw.cancel = nil
	}
}

// feedRun runs a machinefeed.Feed while the workers run.
type feedRun struct {
	feed   *machinefeed.Feed
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func (f *feedRun) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done.Go(func() { f.feed.Run(ctx) })
}

func (f *feedRun) stop() {
	f.cancel()
	f.done.Wait()
}
