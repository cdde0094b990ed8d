package agent

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// handToRuntime gives the runtime the containers of hand-over epoch. A
// runtime that cannot take them leaves them exited, journalled with why.
func (a *Agent) handToRuntime(ctx context.Context, epoch uint64, specs []mesh.Container) {
	err := a.rt.Apply(ctx, specs, a.updater(epoch))
	if err == nil {
		return
	}
	a.log.Error().Err(err).Str("runtime", a.rt.Name()).Msg("runtime could not take the declaration")
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.epoch != epoch || a.readableLocked() != nil {
		return
	}
	ts := now()
	declared := make([]mesh.Container, len(a.containers))
	for i := range a.containers {
		rc := &a.containers[i]
		rc.State, rc.Since, rc.Reason = mesh.StateExited, ts, "the runtime could not take the declaration: "+err.Error()
		a.judgeStateLocked(rc, a.watches[rc.Module])
		declared[i] = rc.Declared()
	}
	a.touchLocked()
	e := Entry{Outcome: OutcomeRuntimeFailed, Message: err.Error(), Machine: a.machine, Seq: a.ledger.LastSeq, Containers: declared, Ports: portsOf(a.watches)}
	if a.ledger.Last != nil {
		e.Plan, e.Request, e.Merge = a.ledger.Last.Plan, a.ledger.Last.Request, mergeOf(a.ledger.Last.Plan)
	}
	if jerr := a.appendLocked(&e); jerr != nil {
		a.log.Error().Err(jerr).Msg("could not journal the runtime's failure")
		return
	}
	if cerr := a.checkpointLocked(); cerr != nil {
		a.log.Error().Err(cerr).Msg("checkpoint failed")
	}
}

// updater is the runtime's callback for hand-over epoch.
func (a *Agent) updater(epoch uint64) func(Update) {
	return func(u Update) {
		a.mu.Lock()
		took := a.observeLocked(epoch, u)
		a.mu.Unlock()
		if took && a.observed != nil {
			a.observed(u)
		}
	}
}

// observeLocked takes a container's new state in. Reaching running is
// journalled and, for a container without a check, only then raises the
// floor (host.Ledger.Ran); one with a check raises it once it has been
// healthy for min_healthy (judgeStateLocked).
// Failing is journalled; starting is only reported. A restart the runtime
// counts is reported.
func (a *Agent) observeLocked(epoch uint64, u Update) bool {
	if a.epoch != epoch || a.readableLocked() != nil {
		return false
	}
	rc := a.containerLocked(u.Module)
	if rc == nil {
		return false
	}
	since := now()
	if !u.Since.IsZero() {
		since = u.Since.UTC().Format(time.RFC3339Nano)
	}
	if u.State == mesh.StateStarting && u.Reason != "" {
		// Not started yet, and the runtime says why (a pull it will retry):
		// logged, not journalled, since nothing changed state.
		a.log.Warn().Str("module", rc.Module).Str("digest", rc.Digest).Uint64("seq", rc.Seq).
			Str("reason", u.Reason).Msg("container not started yet")
	}
	restarted := rc.Restarts != u.Restarts
	rc.Restarts = u.Restarts
	reason := u.Reason
	if u.State == mesh.StateRunning {
		reason = ""
	}
	explained := rc.Reason != reason
	rc.Reason = reason
	if rc.State == u.State {
		if restarted && u.State == mesh.StateRunning {
			// Running again after a restart the runtime saw only by its
			// count (the engine restarted it between two looks): its time
			// running, and so healthy, starts anew.
			rc.Since = since
			a.judgeStateLocked(rc, a.watches[rc.Module])
		}
		if restarted || explained {
			a.touchLocked()
		}
		return true
	}
	rc.State, rc.Since = u.State, since
	defer a.touchLocked()
	outcome := map[string]string{
		mesh.StateRunning: OutcomeRunning, mesh.StateCrashLooping: OutcomeCrashLooping, mesh.StateExited: OutcomeExited,
	}[u.State]
	if outcome != "" && a.journalContainerLocked(rc, outcome, u.Reason) {
		ev := a.log.Info()
		if outcome == OutcomeRunning && rc.Check == nil {
			a.ledger.Ran(*rc)
		} else if outcome != OutcomeRunning {
			ev = a.log.Warn().Str("reason", u.Reason).Int("restarts", rc.Restarts)
		}
		ev.Str("module", rc.Module).Str("digest", rc.Digest).Int64("generation", rc.Generation).
			Uint64("seq", rc.Seq).Str("state", u.State).Msg("container " + u.State)
		if err := a.checkpointLocked(); err != nil {
			a.log.Error().Err(err).Msg("checkpoint failed")
		}
	}
	a.judgeStateLocked(rc, a.watches[rc.Module])
	return true
}

// containerLocked is the declared container of module, or nil.
func (a *Agent) containerLocked(module string) *mesh.RunningContainer {
	i := slices.IndexFunc(a.containers, func(rc mesh.RunningContainer) bool { return rc.Module == module })
	if i < 0 {
		return nil
	}
	return &a.containers[i]
}

// journalContainerLocked journals outcome for rc alone (as declared, with
// the port picked for it) and says whether it was written. Unjournalled,
// nothing that needs the entry (the floor) may follow; the container still
// holds the floor through the report while it runs, if it has no check.
func (a *Agent) journalContainerLocked(rc *mesh.RunningContainer, outcome, message string) bool {
	e := Entry{
		Outcome: outcome, Message: message, Machine: a.machine, Seq: rc.Seq, Plan: rc.Plan,
		Merge: mergeOf(rc.Plan), Containers: []mesh.Container{rc.Declared()},
	}
	if w := a.watches[rc.Module]; w != nil && w.port != 0 {
		e.Ports = map[string]int{rc.Module: w.port}
	}
	if a.ledger.Last != nil {
		e.Request = a.ledger.Last.Request
	}
	if err := a.appendLocked(&e); err != nil {
		a.log.Error().Err(err).Str("module", rc.Module).Str("outcome", outcome).Msg("could not journal a container's transition")
		return false
	}
	return true
}

// specsLocked are the containers as the runtime is to run them, with the
// ports picked for them (resolved).
func (a *Agent) specsLocked() []mesh.Container {
	out := make([]mesh.Container, len(a.containers))
	for i, rc := range a.containers {
		port := 0
		if w := a.watches[rc.Module]; w != nil {
			port = w.port
		}
		out[i] = resolved(rc.Declared(), port)
	}
	return out
}

// declared is the report's view of d just applied: every container starting
// and not judged yet, except one declared exactly as it already runs, which
// keeps running, and keeps its health and restarts.
func declared(d mesh.Declaration, prev []mesh.RunningContainer, ts string) []mesh.RunningContainer {
	out := make([]mesh.RunningContainer, 0, len(d.Containers))
	for _, c := range d.Containers {
		c = host.CloneContainer(c)
		rc := mesh.RunningContainer{
			Module: c.Module, Digest: c.Digest, Generation: c.Generation,
			Plan: d.Plan, Seq: d.Seq, State: mesh.StateStarting, Since: ts,
			Commit: c.Commit, Image: c.Image, Args: c.Args, Env: c.Env, Check: c.Health, Network: c.Network, Settings: c.Settings,
			Health: mesh.HealthUnknown,
		}
		if i := slices.IndexFunc(prev, func(p mesh.RunningContainer) bool { return p.Module == c.Module }); i >= 0 &&
			prev[i].State == mesh.StateRunning && mesh.SameSpec(prev[i].Declared(), c) {
			p := cloneRunning(prev[i])
			rc.State, rc.Since = mesh.StateRunning, p.Since
			rc.Health, rc.HealthySince, rc.Restarts, rc.LastProbe = p.Health, p.HealthySince, p.Restarts, p.LastProbe
		}
		out = append(out, rc)
	}
	slices.SortFunc(out, func(x, y mesh.RunningContainer) int { return strings.Compare(x.Module, y.Module) })
	return out
}

func cloneRunning(rc mesh.RunningContainer) mesh.RunningContainer {
	rc.Args = slices.Clone(rc.Args)
	rc.Env = maps.Clone(rc.Env)
	rc.Check = host.CloneHealth(rc.Check)
	if rc.LastProbe != nil {
		p := *rc.LastProbe
		if p.ExitCode != nil {
			code := *p.ExitCode
			p.ExitCode = &code
		}
		rc.LastProbe = &p
	}
	return rc
}

func digests(d mesh.Declaration) []string {
	out := make([]string, len(d.Containers))
	for i, c := range d.Containers {
		out[i] = c.Module + "=" + c.Digest
	}
	return out
}
