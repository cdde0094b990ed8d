package mesh

import (
	"slices"
	"time"
)

// Health says how a container is judged healthy on its machine: by one
// probe (an HTTP GET, a TCP connect or a command), or, with none, by its
// process staying up. It travels in the declaration because only the host
// agent can reach the container, and only the mesh config knows the
// module. Times are whole milliseconds on the wire, so that an agent
// written in any language reads them without a duration parser.
//
// A declaration without Health (one from a worker before health existed)
// is judged as before: a container that runs is healthy at once.
type Health struct {
	// HTTP probes GET http://127.0.0.1:<port><path>; a 2xx answer is
	// healthy.
	HTTP *HTTPProbe `json:"http,omitempty"`
	// TCP probes a connect to 127.0.0.1:<port>.
	TCP *TCPProbe `json:"tcp,omitempty"`
	// Exec runs a command on the machine, in the container's environment
	// (the exec runtime: beside the process; docker: docker exec); exit 0
	// is healthy.
	Exec []string `json:"exec,omitempty"`
	// IntervalMS is the time between probes.
	IntervalMS int64 `json:"interval_ms,omitempty"`
	// TimeoutMS bounds one probe; a probe that takes longer failed.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// MinHealthyMS is how long a container must be healthy without a break
	// before it counts: before then a crash, an exit, a restart or a failed
	// probe fails it. It is also when the host's floor for the module
	// rises.
	MinHealthyMS int64 `json:"min_healthy_ms"`
	// DeadlineMS is how long after it was declared a container may take to
	// count healthy; past it the machine has failed.
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
}

// PortAuto as a probe's port asks the host agent to pick a free port for
// the container, pass it in the container's environment as EnvPort (and map
// it, under docker), and probe that: what lets one module run several times
// on one box, as the example mesh does.
const PortAuto = 0

// EnvPort is the variable a container whose probe port is PortAuto finds
// its port in.
const EnvPort = "MESHROLL_PORT"

// The variables every runtime sets in a container's environment (and its
// exec probe's), over any declared value of the same name, so that a
// process, its logs and its probe can tell which machine, module and build
// they are without the declaration repeating it per machine.
const (
	EnvMachine = "MESHROLL_MACHINE"
	EnvModule  = "MESHROLL_MODULE"
	EnvDigest  = "MESHROLL_DIGEST"
)

// RuntimeEnv is the variables a runtime sets for c on machine.
func RuntimeEnv(machine string, c Container) map[string]string {
	return map[string]string{EnvMachine: machine, EnvModule: c.Module, EnvDigest: c.Digest}
}

// HTTPProbe is an HTTP health check.
type HTTPProbe struct {
	// Port is the container's port, or PortAuto.
	Port int `json:"port"`
	// Path is the request path (default "/").
	Path string `json:"path,omitempty"`
}

// TCPProbe is a TCP connect check.
type TCPProbe struct {
	// Port is the container's port, or PortAuto.
	Port int `json:"port"`
}

// Clone is a deep copy of h, so that a check kept by a ledger, a runtime or
// a config shares nothing with its caller's.
func (h Health) Clone() Health {
	if h.HTTP != nil {
		p := *h.HTTP
		h.HTTP = &p
	}
	if h.TCP != nil {
		p := *h.TCP
		h.TCP = &p
	}
	h.Exec = slices.Clone(h.Exec)
	return h
}

// Interval is IntervalMS as a duration.
func (h Health) Interval() time.Duration { return ms(h.IntervalMS) }

// Timeout is TimeoutMS as a duration.
func (h Health) Timeout() time.Duration { return ms(h.TimeoutMS) }

// MinHealthy is MinHealthyMS as a duration.
func (h Health) MinHealthy() time.Duration { return ms(h.MinHealthyMS) }

// Deadline is DeadlineMS as a duration.
func (h Health) Deadline() time.Duration { return ms(h.DeadlineMS) }

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// Health states a host reports (RunningContainer.Health).
const (
	// HealthUnknown: not judged yet (starting, or within its first probe).
	HealthUnknown = "unknown"
	// HealthHealthy: the probe passes (or, without one, the process runs);
	// HealthySince says since when.
	HealthHealthy = "healthy"
	// HealthUnhealthy: the last probe failed, or the container is not
	// running.
	HealthUnhealthy = "unhealthy"
)

// ProbeResult is a probe's last outcome, for a person to read why a
// container is not healthy.
type ProbeResult struct {
	// At is when the probe ran (RFC 3339).
	At string `json:"at"`
	// OK is whether it passed.
	OK bool `json:"ok"`
	// Status is the HTTP status of an http probe (0 when none came back).
	Status int `json:"status,omitempty"`
	// ExitCode is an exec probe's exit code.
	ExitCode *int `json:"exit_code,omitempty"`
	// Output is the first lines of an exec probe's output or an http
	// probe's body, or the error that stopped the probe.
	Output string `json:"output,omitempty"`
}
