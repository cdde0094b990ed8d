package workerapp

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// JoinedBy is who a sync the worker starts for a machine that joined the
// mesh config is by, as the Web UI and plan list show it.
const JoinedBy = "meshroll (the machine joined the mesh config)"

// syncStartAttempts bounds the tries to start one joined machine's sync,
// a second apart and more, before the worker logs the command that does it
// by hand.
const syncStartAttempts = 6

// inventory follows the worker's live mesh config (config.Live): each edit
// that loads and validates is put in force, the hosts' watcher follows the
// machines it names, and a machine that joined is brought to the newest
// healthy build of each module the config gives it by a sync the worker
// starts itself, without anyone merging. An edit that does not load is
// refused in the log, naming the key and line, and changes nothing.
type inventory struct {
	live  *config.Live
	c     client.Client
	watch *hostWatch // nil without a catalogue
	log   zerolog.Logger

	cancel context.CancelFunc
	done   sync.WaitGroup
}

func (inv *inventory) start() {
	ctx, cancel := context.WithCancel(context.Background())
	inv.cancel = cancel
	inv.done.Go(func() {
		inv.live.Watch(ctx, 0, func(ch config.Change) { inv.changed(ctx, ch) }, func(err error) {
			inv.log.Error().Err(err).Msg("mesh config edit refused; the config in force stays")
		})
	})
}

func (inv *inventory) stop() {
	inv.cancel()
	inv.done.Wait()
}

// changed acts on a change put in force.
func (inv *inventory) changed(ctx context.Context, ch config.Change) {
	cfg := inv.live.Current()
	inv.log.Info().Strs("joined", ch.Joined).Strs("left", ch.Left).Strs("moved", ch.Moved).
		Strs("machines", cfg.MachineNames()).Msg("mesh config reloaded")
	if len(ch.Restart) > 0 {
		inv.log.Warn().Strs("sections", ch.Restart).
			Msg("mesh config sections changed that take a worker restart; they are kept as they were until then")
	}
	if ch.Hosts() && inv.watch != nil {
		inv.watch.follow(cfg)
	}
	for _, name := range ch.Joined {
		for _, module := range cfg.Machines[name].Modules {
			inv.done.Go(func() { inv.sync(ctx, cfg, name, module) })
		}
	}
}

// sync starts the sync of module on a machine that joined, trying again
// while Temporal does not take it.
func (inv *inventory) sync(ctx context.Context, cfg *config.Config, machine, module string) {
	log := inv.log.With().Str("machine", machine).Str("module", module).Logger()
	in := meshapi.PlanInput{Module: module, Policy: cfg.PushPolicy(), Sync: &meshapi.Sync{Machine: machine, By: JoinedBy}}
	wait := time.Second
	for attempt := 1; ; attempt++ {
		started, err := plans.Start(ctx, inv.c, cfg.Temporal.TaskQueue, in)
		if err == nil {
			log.Info().Str("plan", started.ID).Bool("existing", started.Existing).Msg("machine joined: sync started")
			return
		}
		if attempt == syncStartAttempts {
			log.Error().Err(err).Str("command", "starter machine sync "+machine+" --module "+module).
				Msg("machine joined but its sync could not be started; run the command")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
			wait *= 2
		}
	}
}
