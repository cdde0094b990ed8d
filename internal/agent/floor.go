package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// A container's floor (host.Ledger.Floor) rises once it has been healthy
// for its min_healthy without a break; this is the wait for that moment.

// awaitFloorLocked raises rc's floor once it has been healthy for its
// check's min_healthy without a break (at once when that is 0). A break
// stops the wait (stopDueLocked), and the rise checks the container is
// still healthy since the same moment, so a late timer changes nothing.
func (a *Agent) awaitFloorLocked(rc *mesh.RunningContainer, w *watch) {
	w.stopDueLocked()
	since, minHealthy := rc.HealthySince, rc.Check.MinHealthy()
	if minHealthy <= 0 {
		a.raiseFloorLocked(w, since)
		return
	}
	restarts := rc.Restarts
	w.due = a.clock.AfterFunc(minHealthy, func() {
		if !a.unbroken(w.module, restarts) {
			return // the runtime's report of the break follows, and judges anew
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.raiseFloorLocked(w, since)
	})
}

// unbroken asks a runtime that reports by looking (a Confirmer) whether
// module's container still runs with no restart beyond restarts; other
// runtimes report every change as it happens, and an answer that cannot be
// had counts as a break.
func (a *Agent) unbroken(module string, restarts int) bool {
	c, ok := a.rt.(Confirmer)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := c.Unbroken(ctx, module, restarts)
	if err != nil {
		a.log.Warn().Err(err).Str("module", module).Msg("could not confirm the container ran unbroken; its floor waits")
	}
	return ok && err == nil
}

// raiseFloorLocked journals that w's container counted healthy (healthy
// since since, for min_healthy) and only then raises its module's floor, as
// a container without a check does on reaching running.
func (a *Agent) raiseFloorLocked(w *watch, since string) {
	rc := a.containerLocked(w.module)
	if a.readableLocked() != nil || a.watches[w.module] != w || rc == nil ||
		rc.State != mesh.StateRunning || rc.Health != mesh.HealthHealthy || rc.HealthySince != since {
		return
	}
	msg := fmt.Sprintf("healthy since %s for min_healthy %s", since, rc.Check.MinHealthy())
	if !a.journalContainerLocked(rc, OutcomeFloorRaised, msg) {
		return
	}
	a.ledger.Ran(*rc)
	a.log.Info().Str("module", rc.Module).Str("digest", rc.Digest).Int64("generation", rc.Generation).
		Uint64("seq", rc.Seq).Str("healthy_since", since).Msg("container counts healthy; floor raised")
	if err := a.checkpointLocked(); err != nil {
		a.log.Error().Err(err).Msg("checkpoint failed")
	}
}
