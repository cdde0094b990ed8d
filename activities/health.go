package activities

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// healthWatch judges, from a host's successive reports, whether a sent
// declaration has become healthy: every container healthy without a break
// for its MinHealthy. It is fed reports and this worker's clock and holds no
// I/O, so every rule below is a table test.
//
// The window is timed on the worker's clock from the report in which the
// container was first seen healthy, never from the host's healthy_since,
// so a host whose clock runs ahead cannot shorten it. What the host says
// is used only to see breaks: a new healthy_since, a restart, an exit.
//
// The rules, per container:
//   - crash-looping or exited fails the push at once;
//   - a restart (the host's restart count rising) fails it at once;
//   - before it is first healthy, a failing probe is waited out (a service
//     takes a moment to listen) until the deadline;
//   - once healthy, any break before MinHealthy has passed (a failed probe,
//     a new healthy_since) fails it;
//   - declared without Health (a container kept as a host reported it
//     without its check), it counts once running;
//   - on a host that does not judge health (health empty in its report),
//     the process running is the probe, and MinHealthy still applies.
type healthWatch struct {
	decl    mesh.Declaration
	seq     uint64
	windows map[string]*healthWindow
	// pending says, per container not yet counted, where it stands, for
	// the reason a deadline gives.
	pending map[string]string
}

// healthWindow is one container's time healthy as this worker saw it.
type healthWindow struct {
	// restarts is the host's restart count when the container was first
	// seen running with its digest; any rise is a restart.
	restarts int
	// healthyKey is the host's healthy_since (or since) of the stretch
	// being timed, "" before the container was first seen healthy.
	healthyKey string
	// start is when this worker first saw that stretch.
	start time.Time
}

func newHealthWatch(d mesh.Declaration, seq uint64) *healthWatch {
	return &healthWatch{decl: d, seq: seq, windows: map[string]*healthWindow{}, pending: map[string]string{}}
}

// step reads one report taken at now. done means every container counts
// healthy and the host has applied the declaration; failed, when not
// empty, is why the push has failed for good.
func (w *healthWatch) step(rep mesh.Report, now time.Time) (done bool, failed string) {
	done = rep.LastSeq >= w.seq
	clear(w.pending)
	var bad []string
	for _, c := range w.decl.Containers {
		r, ok := rep.Running(c.Module)
		if !ok || r.Digest != c.Digest {
			done = false
			w.pending[c.Module] = "not applied yet"
			continue
		}
		counted, why, fail := w.judge(c, r, now)
		if fail {
			bad = append(bad, buildWords(c)+" "+why)
			continue
		}
		if !counted {
			done = false
			w.pending[c.Module] = why
		}
	}
	if len(bad) > 0 {
		// No machine here: the plan's reason, the host's journal and the
		// machine workflow each say which machine already.
		return false, fmt.Sprintf("declaration %d: %s", w.seq, strings.Join(bad, "; "))
	}
	return done, ""
}

// judge is one container's standing: counted, or why not, and whether
// that is a failure.
func (w *healthWatch) judge(c mesh.Container, r mesh.RunningContainer, now time.Time) (counted bool, why string, fail bool) {
	switch r.State {
	case mesh.StateCrashLooping, mesh.StateExited:
		return false, "is " + stateWords(r) + probeSuffix(r), true
	case mesh.StateRunning:
	default:
		return false, "is " + stateWords(r), false
	}
	if c.Health == nil {
		return true, "", false
	}
	win := w.windows[c.Module]
	if win == nil {
		win = &healthWindow{restarts: r.Restarts}
		w.windows[c.Module] = win
	}
	if r.Restarts > win.restarts {
		return false, fmt.Sprintf("restarted (%d times) before it had been healthy for %s%s", r.Restarts-win.restarts, c.Health.MinHealthy(), probeSuffix(r)), true
	}
	healthy, key := r.Health == mesh.HealthHealthy, r.HealthySince
	if r.Health == "" { // a host that does not judge health: running is healthy
		healthy, key = true, r.Since
	}
	switch {
	case !healthy && win.healthyKey == "":
		return false, "is not healthy yet (" + probeName(c.Health) + probeSuffix(r) + ")", false
	case !healthy:
		return false, fmt.Sprintf("failed its %s after %s healthy, before %s%s",
			probeName(c.Health), now.Sub(win.start).Round(time.Millisecond), c.Health.MinHealthy(), probeSuffix(r)), true
	case win.healthyKey != "" && key != win.healthyKey:
		return false, fmt.Sprintf("broke its healthy stretch after %s, before %s%s",
			now.Sub(win.start).Round(time.Millisecond), c.Health.MinHealthy(), probeSuffix(r)), true
	case win.healthyKey == "":
		win.healthyKey, win.start = key, now
	}
	if healthyFor := now.Sub(win.start); healthyFor < c.Health.MinHealthy() {
		return false, fmt.Sprintf("healthy for %s of %s", healthyFor.Round(time.Millisecond), c.Health.MinHealthy()), false
	}
	return true, "", false
}

// wake is how long a long-poll of the report may wait before the watch
// must look again even if nothing changes: until the first healthy window
// still running completes, at most most. A window already complete does
// not count: its container is counted at the next look.
func (w *healthWatch) wake(now time.Time, most time.Duration) time.Duration {
	d := most
	for _, c := range w.decl.Containers {
		if win := w.windows[c.Module]; win != nil && win.healthyKey != "" && c.Health != nil {
			if left := win.start.Add(c.Health.MinHealthy()).Sub(now); left > 0 {
				d = min(d, left)
			}
		}
	}
	return d
}

// deadline is how long the push waits for the declaration to count
// healthy: the longest declared Deadline, at most limit (the push policy's
// running timeout, which bounds the activity itself).
func (w *healthWatch) deadline(limit time.Duration) time.Duration {
	longest := time.Duration(0)
	for _, c := range w.decl.Containers {
		if c.Health != nil {
			longest = max(longest, c.Health.Deadline())
		}
	}
	if longest == 0 {
		return limit
	}
	return min(longest, limit)
}

// stillPending lists, for a deadline's reason, where each container not
// yet counted stood at the last report.
func (w *healthWatch) stillPending() string {
	var parts []string
	for _, c := range w.decl.Containers {
		if why, ok := w.pending[c.Module]; ok {
			parts = append(parts, buildWords(c)+" "+why)
		}
	}
	return strings.Join(parts, "; ")
}

// buildWords names a declared container's build as the put-back names the
// build it goes back to: "host generation 218 (sha256:972ae466bc94)".
func buildWords(c mesh.Container) string {
	return fmt.Sprintf("%s generation %d (%s)", c.Module, c.Generation, mesh.ShortDigest(c.Digest))
}

// stateWords is a container's state with its runtime's reason, when it
// gave one: "exited (exit status 1)".
func stateWords(r mesh.RunningContainer) string {
	if r.Reason == "" {
		return r.State
	}
	return r.State + " (" + r.Reason + ")"
}

// probeName says what judges a container, as a person reads it.
func probeName(h *mesh.Health) string {
	switch {
	case h.HTTP != nil:
		return fmt.Sprintf("http probe (GET :%s%s)", probePort(h.HTTP.Port), h.HTTP.Path)
	case h.TCP != nil:
		return fmt.Sprintf("tcp probe (:%s)", probePort(h.TCP.Port))
	case len(h.Exec) > 0:
		return fmt.Sprintf("exec probe (%s)", strings.Join(h.Exec, " "))
	}
	return "process check (no probe: healthy while it runs)"
}

func probePort(p int) string {
	if p == mesh.PortAuto {
		return "$" + mesh.EnvPort
	}
	return fmt.Sprint(p)
}

// probeSuffix is the last probe's outcome, when the host reported one.
func probeSuffix(r mesh.RunningContainer) string {
	p := r.LastProbe
	if p == nil || p.OK {
		return ""
	}
	var b strings.Builder
	b.WriteString("; last probe")
	if p.Status != 0 {
		fmt.Fprintf(&b, " answered %d", p.Status)
	}
	if p.ExitCode != nil {
		fmt.Fprintf(&b, " exited %d", *p.ExitCode)
	}
	if out := strings.TrimSpace(p.Output); out != "" {
		// One line, so that the reason reads as one in a list or a log.
		fmt.Fprintf(&b, ": %s", strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " / ")), " "))
	}
	return b.String()
}
