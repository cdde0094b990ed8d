package workerapp

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// JoinedBy is who a sync the worker starts for a machine that joined the
// mesh config is by, as the Web UI and plan list show it; AdmittedBy for
// a machine an operator admitted through enrollment.
const (
	JoinedBy   = "meshroll (the machine joined the mesh config)"
	AdmittedBy = "meshroll (the machine was admitted)"
)

// attempts bounds the tries of what the worker does for a machine that
// joined or left (start its sync, retire its workflow), a second apart and
// more, before it logs what to do by hand.
const attempts = 6

// inventory follows the worker's live mesh config (config.Live): each edit
// that loads and validates is put in force, the hosts' watcher follows the
// machines it names, and a machine that joined is brought to the newest
// healthy build of each module the config gives it by a sync the worker
// starts itself, without anyone merging; the workflow of a machine that
// left is told to end once its queue is empty (meshapi.Retire). An edit
// that does not load is refused in the log, naming the key and line, and
// changes nothing.
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
			inv.log.Error().Err(err).Msg("mesh config change not taken; the config in force stays")
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
	for _, name := range slices.Sorted(maps.Keys(ch.NotAdmitted)) {
		inv.log.Warn().Str("machine", name).Str("why", ch.NotAdmitted[name]).
			Msg("an admitted machine is left out of the mesh config in force")
	}
	if len(ch.Restart) > 0 {
		inv.log.Warn().Strs("sections", ch.Restart).
			Msg("mesh config sections changed that take a worker restart; they are kept as they were until then")
	}
	if ch.Hosts() && inv.watch != nil {
		inv.watch.follow(cfg, ch)
	}
	for _, name := range ch.Joined {
		for _, module := range cfg.Machines[name].Modules {
			inv.done.Go(func() { inv.sync(ctx, cfg, name, module) })
		}
	}
	for _, name := range ch.Left {
		inv.done.Go(func() { inv.retire(ctx, name) })
	}
}

// sync starts the sync of module on a machine that joined.
func (inv *inventory) sync(ctx context.Context, cfg *config.Config, machine, module string) {
	log := inv.log.With().Str("machine", machine).Str("module", module).Logger()
	by := JoinedBy
	if cfg.Machines[machine].Admitted {
		by = AdmittedBy
	}
	in := meshapi.PlanInput{Module: module, Policy: cfg.PushPolicy(), Sync: &meshapi.Sync{Machine: machine, By: by}}
	inv.try(ctx, log, "starter machine sync "+machine+" --module "+module, func() error {
		started, err := plans.Start(ctx, inv.c, cfg.Temporal.TaskQueue, in)
		if err == nil {
			log.Info().Str("plan", started.ID).Bool("existing", started.Existing).Msg("machine joined: sync started")
		}
		return err
	})
}

// retire tells the workflow of a machine that left to end; a machine that
// has none has nothing to end.
func (inv *inventory) retire(ctx context.Context, machine string) {
	log := inv.log.With().Str("machine", machine).Logger()
	id := meshapi.MachineID(machine)
	inv.try(ctx, log, "temporal workflow signal --workflow-id "+id+" --name "+meshapi.SignalRetire+` --input '{"reason":"left the mesh config"}'`, func() error {
		err := inv.c.SignalWorkflow(ctx, id, "", meshapi.SignalRetire, meshapi.Retire{Reason: "left the mesh config"})
		var gone *serviceerror.NotFound
		switch {
		case errors.As(err, &gone):
			log.Info().Msg("machine left: it has no workflow to end")
			return nil
		case err == nil:
			log.Info().Str("workflow", id).Msg("machine left: its workflow ends once its queue is empty")
		}
		return err
	})
}

// try calls fn until it succeeds, while Temporal does not take it, and
// logs the command that does it by hand when it gives up.
func (inv *inventory) try(ctx context.Context, log zerolog.Logger, command string, fn func() error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return
		}
		if attempt == attempts {
			log.Error().Err(err).Str("command", command).Msg("the mesh config changed but the worker could not act on it; run the command")
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
