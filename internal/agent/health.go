package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// Probe defaults, for a check that leaves its interval or timeout zero: a
// second between probes is what a roll-out waiting on min_healthy can afford
// to lose, and a loopback answer slower than a second is not healthy.
const (
	DefaultProbeInterval = time.Second
	DefaultProbeTimeout  = time.Second
	// MaxProbeOutput bounds what a probe's result keeps of its output (or
	// its error): the first lines, enough to say why, small enough to go
	// in every report and journal entry.
	MaxProbeOutput = 512
)

// clock is the agent's time for judging health, injected by tests so that
// probe intervals and min_healthy pass without sleeping.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// the returned stop is called first.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// watch is the agent's own part of a declared container, beside its line
// in the report: the loopback port it chose for it, and the judging of its
// health. A container re-declared unchanged keeps its watch, as the runtime
// keeps its process.
type watch struct {
	module string
	spec   mesh.Container // as declared
	// port is the port picked for a mesh.PortAuto probe, 0 for none. It
	// stays the container's across its restarts, being in its spec.
	port int

	// Under Agent.mu.
	//
	// probing stops the prober; nil while none runs. run numbers the
	// prober runs, so that a stopped one's late result is dropped.
	probing context.CancelFunc
	run     uint64
	// due stops the timer that raises the floor; nil while none is set.
	due func() bool
}

// stopLocked ends w's probing and its wait for the floor.
func (w *watch) stopLocked() {
	if w.probing != nil {
		w.probing()
		w.probing = nil
	}
	w.stopDueLocked()
}

func (w *watch) stopDueLocked() {
	if w.due != nil {
		w.due()
		w.due = nil
	}
}

// watchesFor returns the watches of d's containers: the previous one of a
// container declared exactly as before, a new one otherwise, with a free
// loopback port picked for a mesh.PortAuto probe. Ports already given out
// are not picked again, since the process a new container replaces may
// still hold its own. kept, on start, is the ports the last agent picked,
// by module: given again, so that a container that outlived it (docker)
// keeps the port it listens on, and so its spec, and is adopted, not
// replaced. New ports are picked in ports.
func watchesFor(d mesh.Declaration, prev map[string]*watch, kept map[string]int, ports PortRange) (map[string]*watch, error) {
	taken := map[int]bool{}
	for _, w := range prev {
		taken[w.port] = true
	}
	next := make(map[string]*watch, len(d.Containers))
	for _, c := range d.Containers {
		if w, ok := prev[c.Module]; ok && mesh.SameSpec(w.spec, c) {
			next[c.Module] = w
			continue
		}
		w := &watch{module: c.Module, spec: host.CloneContainer(c)}
		if p := kept[c.Module]; autoPort(c.Health) && p != 0 && !taken[p] {
			w.port, taken[p] = p, true
		} else if autoPort(c.Health) {
			p, err := ports.pick(taken)
			if err != nil {
				return nil, fmt.Errorf("module %s: %w", c.Module, err)
			}
			w.port, taken[p] = p, true
		}
		next[c.Module] = w
	}
	return next, nil
}

// portsOf lists the picked ports of ws, for the journal; nil when none.
func portsOf(ws map[string]*watch) map[string]int {
	var out map[string]int
	for m, w := range ws {
		if w.port != 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[m] = w.port
		}
	}
	return out
}

// autoPort reports whether h's probe asks the agent to pick its port.
func autoPort(h *mesh.Health) bool {
	return h != nil && (h.HTTP != nil && h.HTTP.Port == mesh.PortAuto || h.TCP != nil && h.TCP.Port == mesh.PortAuto)
}

// probePort is the loopback port h's http or tcp probe reaches, 0 for
// none: the port the docker runtime publishes.
func probePort(h *mesh.Health) int {
	switch {
	case h == nil:
		return 0
	case h.HTTP != nil:
		return h.HTTP.Port
	case h.TCP != nil:
		return h.TCP.Port
	}
	return 0
}

// hasProbe reports whether h names a probe; without one (or without h) the
// process running is the probe.
func hasProbe(h *mesh.Health) bool {
	return h != nil && (h.HTTP != nil || h.TCP != nil || len(h.Exec) > 0)
}

// resolved is c as the runtime runs it: with the port picked for it (0:
// none) as its probe's port and in its environment as mesh.EnvPort, over
// any declared value of that name.
func resolved(c mesh.Container, port int) mesh.Container {
	c = host.CloneContainer(c)
	if port == 0 || !autoPort(c.Health) {
		return c
	}
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	c.Env[mesh.EnvPort] = strconv.Itoa(port)
	if c.Health.HTTP != nil {
		c.Health.HTTP.Port = port
	} else {
		c.Health.TCP.Port = port
	}
	return c
}

// judgeStateLocked judges rc's health on a change of its runtime state.
// Leaving running breaks it (a container that exits or crash-loops is
// unhealthy; one still starting is unknown until judged). Reaching running
// starts its probe, or, without one, makes it healthy at once; with a check
// the floor then waits for min_healthy, without one it rose with the
// running entry (observeLocked).
func (a *Agent) judgeStateLocked(rc *mesh.RunningContainer, w *watch) {
	if rc.State != mesh.StateRunning {
		delete(a.resume, rc.Module)
		w.stopLocked()
		if rc.Health == mesh.HealthHealthy || rc.State == mesh.StateExited || rc.State == mesh.StateCrashLooping {
			rc.Health, rc.HealthySince = mesh.HealthUnhealthy, ""
		}
		return
	}
	if hasProbe(rc.Check) {
		rc.Health, rc.HealthySince = mesh.HealthUnknown, ""
		a.startProbingLocked(w)
		return
	}
	rc.Health, rc.HealthySince = mesh.HealthHealthy, rc.Since
	if rc.Check != nil {
		a.awaitFloorLocked(rc, w)
	}
}

// startProbingLocked starts w's prober unless it runs.
func (a *Agent) startProbingLocked(w *watch) {
	if w.probing != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.probing = cancel
	w.run++
	a.probers.Add(1)
	go a.probe(ctx, w, w.run)
}

// probe runs w's probe every interval, the first one interval after the
// container reached running (its time to start listening), until ctx ends.
func (a *Agent) probe(ctx context.Context, w *watch, run uint64) {
	defer a.probers.Done()
	spec := resolved(w.spec, w.port)
	interval, timeout := spec.Health.Interval(), spec.Health.Timeout()
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.clock.After(interval):
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		res := a.probeOnce(pctx, spec)
		cancel()
		a.mu.Lock()
		a.probedLocked(w, run, res)
		a.mu.Unlock()
	}
}

// probeOnce runs c's probe once. The noop runtime runs nothing, so its
// probes pass without being run: the process-running rule.
func (a *Agent) probeOnce(ctx context.Context, c mesh.Container) mesh.ProbeResult {
	res := mesh.ProbeResult{At: a.clock.Now().UTC().Format(time.RFC3339Nano)}
	var out head
	var err error
	h := c.Health
	switch _, noop := a.rt.(*NoopRuntime); {
	case noop:
		_, _ = io.WriteString(&out, "runtime noop runs nothing: the probe is taken as passed")
	case h.HTTP != nil:
		res.Status, err = probeHTTP(ctx, h.HTTP.Port, h.HTTP.Path, &out)
	case h.TCP != nil:
		err = probeTCP(ctx, h.TCP.Port)
	default:
		ex, ok := a.rt.(Execer)
		if !ok {
			err = fmt.Errorf("runtime %s cannot run exec probes", a.rt.Name())
			break
		}
		var code int
		if code, err = ex.Exec(ctx, c.Module, h.Exec, &out); err == nil {
			res.ExitCode = &code
			if code != 0 {
				err = fmt.Errorf("exit code %d", code)
			}
		}
	}
	res.OK = err == nil
	switch text := strings.TrimSpace(string(out.b)); {
	case err == nil || res.Status != 0 || res.ExitCode != nil:
		// The answer or the exit code says what failed; the output says why.
		res.Output = brief(text)
	case text != "":
		res.Output = brief(err.Error() + "; output: " + text)
	default:
		res.Output = brief(err.Error())
	}
	return res
}

// probeClient makes http probes: straight to loopback (no proxy), a new
// connection each time (a probe must see a server that stopped
// accepting), no redirects followed (2xx is healthy, nothing else).
var probeClient = &http.Client{
	Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// probeHTTP GETs http://127.0.0.1:port/path, writing the start of the body
// to out; anything but 2xx is an error, with the status returned.
func probeHTTP(ctx context.Context, port int, path string, out io.Writer) (int, error) {
	if path == "" {
		path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+loopback(port)+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(out, io.LimitReader(resp.Body, MaxProbeOutput))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// probeTCP connects to 127.0.0.1:port and hangs up.
func probeTCP(ctx context.Context, port int) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", loopback(port))
	if err != nil {
		return err
	}
	return conn.Close()
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// head keeps the first MaxProbeOutput bytes written to it and takes, without
// keeping, the rest, so that a chatty probe neither blocks nor fills memory.
type head struct{ b []byte }

func (h *head) Write(p []byte) (int, error) {
	if n := MaxProbeOutput - len(h.b); n > 0 {
		h.b = append(h.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

// brief is s cut to MaxProbeOutput bytes of valid UTF-8.
func brief(s string) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) <= MaxProbeOutput {
		return s
	}
	cut := MaxProbeOutput
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// probedLocked takes a probe's result in: passing makes the container
// healthy (since the probe) and starts its wait for the floor; failing
// makes it unhealthy and ends that wait. Each change of health is
// journalled with what the probe said, so that "why did it fail" is in the
// journal; a probe that repeats the last one's outcome only refreshes
// last_probe and leaves the report's revision, so that a long poll is not
// woken every interval.
func (a *Agent) probedLocked(w *watch, run uint64, res mesh.ProbeResult) {
	rc := a.containerLocked(w.module)
	if a.readableLocked() != nil || w.probing == nil || w.run != run || a.watches[w.module] != w ||
		rc == nil || rc.State != mesh.StateRunning {
		return
	}
	changed := rc.LastProbe == nil || !sameOutcome(*rc.LastProbe, res)
	rc.LastProbe = &res
	switch {
	case res.OK && rc.Health != mesh.HealthHealthy:
		rc.Health, rc.HealthySince = mesh.HealthHealthy, a.healthySinceLocked(rc, res.At)
		a.journalHealthLocked(rc, OutcomeHealthy, res)
		a.awaitFloorLocked(rc, w)
		changed = true
	case !res.OK && rc.Health != mesh.HealthUnhealthy:
		rc.Health, rc.HealthySince = mesh.HealthUnhealthy, ""
		w.stopDueLocked()
		a.journalHealthLocked(rc, OutcomeUnhealthy, res)
		changed = true
	}
	if changed {
		a.touchLocked()
	}
}

func (a *Agent) journalHealthLocked(rc *mesh.RunningContainer, outcome string, res mesh.ProbeResult) {
	msg := describe(res)
	if !a.journalContainerLocked(rc, outcome, msg) {
		return
	}
	// Checkpointed at once, so that an agent started again knows exactly
	// since when the container was healthy (resume.go).
	if err := a.checkpointLocked(); err != nil {
		a.log.Error().Err(err).Msg("checkpoint failed")
	}
	ev := a.log.Info()
	if outcome == OutcomeUnhealthy {
		ev = a.log.Warn()
	}
	ev.Str("module", rc.Module).Str("digest", rc.Digest).Uint64("seq", rc.Seq).Str("health", rc.Health).
		Str("probe", msg).Msg("container " + outcome)
}

// describe says what a probe found, for the journal and the log.
func describe(res mesh.ProbeResult) string {
	var what string
	switch {
	case res.Status != 0:
		what = fmt.Sprintf("http status %d", res.Status)
	case res.ExitCode != nil:
		what = fmt.Sprintf("exit code %d", *res.ExitCode)
	case res.OK:
		what = "passed"
	default:
		return res.Output
	}
	if res.Output == "" {
		return what
	}
	return what + ": " + res.Output
}

func sameOutcome(x, y mesh.ProbeResult) bool {
	sameCode := (x.ExitCode == nil) == (y.ExitCode == nil) && (x.ExitCode == nil || *x.ExitCode == *y.ExitCode)
	return x.OK == y.OK && x.Status == y.Status && x.Output == y.Output && sameCode
}
