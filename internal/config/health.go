package config

import (
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Defaults of a module's health. They are what a module without a health
// key gets, so a push never waits on a container for less than
// DefaultMinHealthy without the file saying so.
const (
	// DefaultInterval is the time between probes.
	DefaultInterval = time.Second
	// DefaultTimeout bounds one probe.
	DefaultTimeout = time.Second
	// DefaultMinHealthy is how long a container must stay healthy before it
	// counts: Nomad's default for the same setting, long enough for a
	// container that crashes once it takes traffic to do so.
	DefaultMinHealthy = 10 * time.Second
	// DefaultDeadline is how long a container may take to count healthy
	// before its machine has failed.
	DefaultDeadline = 5 * time.Minute
)

// Health is a module's health key: one probe at most (http, tcp or exec;
// none means healthy while the process runs) and the times that judge it.
// It is kept apart from mesh.Health, the wire form, so that the file speaks
// in durations ("10s") and the wire in whole milliseconds.
type Health struct {
	// HTTP probes GET http://127.0.0.1:<port><path>; a 2xx answer is
	// healthy. Port is 1-65535 or mesh.PortAuto (auto in the file).
	HTTP *mesh.HTTPProbe `mapstructure:"http"`
	// TCP probes a connect to the port.
	TCP *mesh.TCPProbe `mapstructure:"tcp"`
	// Exec is a command whose exit 0 is healthy.
	Exec []string `mapstructure:"exec"`
	// Interval is the time between probes.
	Interval time.Duration `mapstructure:"interval"`
	// Timeout bounds one probe.
	Timeout time.Duration `mapstructure:"timeout"`
	// MinHealthy is how long a container must be healthy without a break
	// before its machine counts; 0 counts it at its first pass.
	MinHealthy time.Duration `mapstructure:"min_healthy"`
	// Deadline is how long after it was declared a container may take to
	// count; past it its machine has failed.
	Deadline time.Duration `mapstructure:"deadline"`
}

// DefaultHealth is the health of a module that says nothing about it: no
// probe, so a container counts once its process has run for
// DefaultMinHealthy.
func DefaultHealth() Health {
	return Health{
		Interval:   DefaultInterval,
		Timeout:    DefaultTimeout,
		MinHealthy: DefaultMinHealthy,
		Deadline:   DefaultDeadline,
	}
}

// HealthCheck is the module's health as a declaration carries it to the
// host agent, which is the only one that can probe the container. A module
// built in code without Health gets DefaultHealth. The result shares
// nothing with the config.
func (m Module) HealthCheck() mesh.Health {
	h := DefaultHealth()
	if m.Health != nil {
		h = *m.Health
	}
	return mesh.Health{
		HTTP:         h.HTTP,
		TCP:          h.TCP,
		Exec:         h.Exec,
		IntervalMS:   h.Interval.Milliseconds(),
		TimeoutMS:    h.Timeout.Milliseconds(),
		MinHealthyMS: h.MinHealthy.Milliseconds(),
		DeadlineMS:   h.Deadline.Milliseconds(),
	}.Clone()
}

// portRule is what a probe's port must be, in the loader's messages and
// Validate's alike.
const portRule = "1-65535, or auto for one the host agent picks per container and passes as " + mesh.EnvPort

// healthProblems checks a module's health (key is modules.<m>.health): one
// probe at most, ports and paths a probe can use, and times that let a
// container count before its deadline.
func healthProblems(ps *problemList, key string, h *Health) {
	if h == nil {
		return
	}
	var kinds []string
	if h.HTTP != nil {
		kinds = append(kinds, "http")
		portProblem(ps, key+".http.port", h.HTTP.Port)
		if !strings.HasPrefix(h.HTTP.Path, "/") {
			ps.add(key+".http.path", "must start with /, such as /healthz, got %q", h.HTTP.Path)
		}
	}
	if h.TCP != nil {
		kinds = append(kinds, "tcp")
		portProblem(ps, key+".tcp.port", h.TCP.Port)
	}
	if h.Exec != nil {
		kinds = append(kinds, "exec")
		if len(h.Exec) == 0 || strings.TrimSpace(h.Exec[0]) == "" {
			ps.add(key+".exec", "names no command; give the command and its arguments, such as [/bin/sh, -c, \"test -e /run/ok\"], or remove exec")
		}
	}
	if n := len(kinds); n > 1 {
		ps.add(key, "has %s and %s probes; a container is judged by one, so keep one", strings.Join(kinds[:n-1], ", "), kinds[n-1])
	}
	for _, f := range []struct {
		key string
		val time.Duration
	}{
		{"interval", h.Interval},
		{"timeout", h.Timeout},
		{"deadline", h.Deadline},
	} {
		// Not just positive: the wire counts whole milliseconds.
		if f.val < time.Millisecond {
			ps.add(key+"."+f.key, "must be a duration of at least 1ms, such as 1s, got %s", f.val)
		}
	}
	if h.MinHealthy < 0 {
		ps.add(key+".min_healthy", "must be a duration of 0s or more, such as 10s, got %s", h.MinHealthy)
	}
	if h.MinHealthy > h.Deadline && h.Deadline > 0 && !ps.skip.has(key+".deadline") && !ps.skip.has(key+".min_healthy") {
		ps.add(key+".min_healthy", "%s is longer than deadline %s, so no container could count healthy in time; lower min_healthy or raise deadline", h.MinHealthy, h.Deadline)
	}
}

func portProblem(ps *problemList, key string, port int) {
	if port < 0 || port > 65535 {
		ps.add(key, "must be a port %s, got %d", portRule, port)
	}
}
