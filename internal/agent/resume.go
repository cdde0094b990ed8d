package agent

import (
	"context"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// A container that outlives its agent (the docker runtime's) keeps running
// healthy while the agent is stopped or killed and started again. The new
// agent has not watched it in between, so it judges it anew; but when the
// runtime shows it is the very container the last agent saw healthy (the
// same digest and restart count, running since before it was seen healthy)
// and its first probe passes, it has been healthy since then, and the
// report says so: a plan baking on the machine sees no break that did not
// happen. Anything else (a restart, an exit, a new declaration, a probe
// that fails first) starts health anew, as before. Only runtimes whose
// containers outlive the agent (Finder: docker) resume; and Open does not
// return, so the agent does not answer, until those containers are judged
// again (awaitResumed): an answer saying "starting" for a container that
// never stopped would read as a break too.

// resumeWait bounds how long Open waits for containers that outlived the
// last agent to be judged again before it answers anyway.
const resumeWait = 30 * time.Second

// resumeMark is a container's health as the last agent recorded it.
type resumeMark struct {
	digest       string
	restarts     int
	healthySince string
}

// resumable is, by module, the containers the checkpoint saw running
// healthy, less those a journal entry after the checkpoint (replay) says
// anything more of: their health since is not known exactly, so it starts
// anew. An applied declaration after the checkpoint drops every mark.
func resumable(cs []mesh.RunningContainer, replay []Entry) map[string]resumeMark {
	marks := map[string]resumeMark{}
	for _, c := range cs {
		if c.State == mesh.StateRunning && c.Health == mesh.HealthHealthy && c.HealthySince != "" {
			marks[c.Module] = resumeMark{digest: c.Digest, restarts: c.Restarts, healthySince: c.HealthySince}
		}
	}
	for _, e := range replay {
		switch e.Outcome {
		case OutcomeApplied, OutcomeFound:
			return map[string]resumeMark{}
		case OutcomeRunning, OutcomeHealthy, OutcomeUnhealthy, OutcomeExited, OutcomeCrashLooping:
			for _, c := range e.Containers {
				delete(marks, c.Module)
			}
		}
		// floor-raised confirms the health the mark holds; a refusal or a
		// repeat changes nothing.
	}
	return marks
}

// healthySinceLocked is when rc, passing a probe at at after not being
// healthy, has been healthy since: at, or the last agent's healthy since
// when rc is the container it saw healthy (see resumeMark). A mark is used
// once.
func (a *Agent) healthySinceLocked(rc *mesh.RunningContainer, at string) string {
	m, ok := a.resume[rc.Module]
	if !ok {
		return at
	}
	delete(a.resume, rc.Module)
	started, err1 := time.Parse(time.RFC3339Nano, rc.Since)
	healthy, err2 := time.Parse(time.RFC3339Nano, m.healthySince)
	if err1 != nil || err2 != nil || m.digest != rc.Digest || m.restarts != rc.Restarts || started.After(healthy) {
		a.log.Info().Str("module", rc.Module).Str("running_since", rc.Since).Int("restarts", rc.Restarts).
			Str("was_healthy_since", m.healthySince).Int("restarts_then", m.restarts).
			Msg("not the container the last agent saw healthy, or restarted since: healthy anew")
		return at
	}
	a.log.Info().Str("module", rc.Module).Str("healthy_since", m.healthySince).
		Msg("the container the last agent saw healthy, never restarted: healthy since then")
	return m.healthySince
}

// awaitResumed waits, at most resumeWait, until every container with a
// resume mark has been judged again: running with its first probe's
// verdict in (healthy, resumed or not, or unhealthy), or no longer running.
func (a *Agent) awaitResumed(ctx context.Context) {
	deadline := time.NewTimer(resumeWait)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		var pending []string
		for m := range a.resume {
			rc := a.containerLocked(m)
			if rc != nil && (rc.State == mesh.StateStarting ||
				rc.State == mesh.StateRunning && (rc.Health == "" || rc.Health == mesh.HealthUnknown)) {
				pending = append(pending, m)
			}
		}
		changed := a.changed
		a.mu.Unlock()
		if len(pending) == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			a.log.Warn().Strs("modules", pending).Dur("waited", resumeWait).
				Msg("containers left running by the last agent are not judged again yet; answering anyway")
			return
		case <-ctx.Done():
			return
		}
	}
}
