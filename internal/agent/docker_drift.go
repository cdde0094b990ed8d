package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Drift: what the runtime does when a container it runs is changed behind
// its back. What is declared is what runs, as on the exec runtime, whose
// supervisor starts a process again whenever it exits:
//
//   - a container removed (docker rm -f) is reported exited, saying so,
//     which the agent journals, and created again from the declaration;
//   - a container stopped (docker stop), or one that exited 0, which the
//     engine's restart policy (on-failure) does not start again, is
//     reported exited and started again after a wait that doubles, from
//     reviveFirst to reviveMost, while it keeps stopping.
//
// Either breaks the container's health, as any exit does.

// Waits before the runtime starts again a container that stopped for good.
const (
	reviveFirst = time.Second
	reviveMost  = 30 * time.Second
	// reviveCalm is how long a container must run for the wait to start
	// over from reviveFirst.
	reviveCalm = 10 * time.Second
	// reviveRetry is how soon a start that failed is tried again.
	reviveRetry = 250 * time.Millisecond
)

// engineError is an Engine API answer that was not a success.
type engineError struct {
	method, path string
	status       int
	message      string
}

func (e *engineError) Error() string {
	return fmt.Sprintf("docker %s %s: %d %s", e.method, e.path, e.status, e.message)
}

// isNotFound reports whether err is the engine's 404: no such container.
func isNotFound(err error) bool {
	var e *engineError
	return errors.As(err, &e) && e.status == http.StatusNotFound
}

// recreate puts back dc's container, removed behind the runtime's back:
// reported exited with why, then created again from its spec (start).
func (r *DockerRuntime) recreate(ctx context.Context, dc *dockerContainer, update func(Update)) {
	r.mu.Lock()
	id, restarts := dc.id, dc.restarts
	dc.id = ""
	r.mu.Unlock()
	r.report(dc, Update{Module: dc.spec.Module, State: mesh.StateExited, Since: time.Now().UTC(), Restarts: restarts,
		Reason: fmt.Sprintf("container %.12s was removed outside meshroll; creating it again from the declaration", id)}, update)
	r.wg.Add(1)
	go r.start(ctx, dc, nil, update)
}

// revivals is how often the runtime itself started dc again.
func (r *DockerRuntime) revivals(dc *dockerContainer) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return dc.revived
}

// revivalsOf is revivals of module's container, 0 when there is none.
func (r *DockerRuntime) revivalsOf(module string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if dc := r.current[module]; dc != nil {
		return dc.revived
	}
	return 0
}

// reviver decides, look by look, when to start again a container that
// stopped for good. Looks come when the engine says something happened,
// and at the safety poll: the follower also looks when due says the wait
// ends, which no event marks.
type reviver struct {
	wait         time.Duration
	stoppedSince time.Time
	runningSince time.Time
}

// look takes in one inspection made at now: stopped says the container
// exited and the engine will not start it again.
func (v *reviver) look(ctx context.Context, r *DockerRuntime, dc *dockerContainer, stopped bool, now time.Time) {
	if !stopped {
		v.stoppedSince = time.Time{}
		if v.runningSince.IsZero() {
			v.runningSince = now
		} else if now.Sub(v.runningSince) >= reviveCalm {
			v.wait = reviveFirst
		}
		return
	}
	v.ranCalm(now)
	v.runningSince = time.Time{}
	if v.stoppedSince.IsZero() {
		v.stoppedSince = now
		return
	}
	if now.Sub(v.stoppedSince) < v.wait || ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	id := dc.id
	r.mu.Unlock()
	if err := r.call(ctx, http.MethodPost, "/containers/"+id+"/start", nil, nil); err != nil {
		return // looked at again at the next look
	}
	r.mu.Lock()
	dc.revived++
	r.mu.Unlock()
	v.stoppedSince, v.wait = time.Time{}, min(2*v.wait, reviveMost)
}

// ranCalm starts the waits over when the container, now stopped, ran
// calm before it stopped: looks come with events, so none may have come
// while it ran past reviveCalm.
func (v *reviver) ranCalm(now time.Time) {
	if !v.runningSince.IsZero() && now.Sub(v.runningSince) >= reviveCalm {
		v.wait = reviveFirst
	}
}

// due is how long after now the reviver needs its next look: when the
// wait of a container stopped for good ends, reviveRetry when it has
// ended (its start failed); 0 when nothing is waited for.
func (v *reviver) due(now time.Time) time.Duration {
	if v.stoppedSince.IsZero() {
		return 0
	}
	return max(v.stoppedSince.Add(v.wait).Sub(now), reviveRetry)
}
