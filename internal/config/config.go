// Package config reads mesh.yaml, the one file that says which modules
// meshroll builds, which machines run them and in which order they are
// pushed. The CLI reads it once per command, the worker again whenever it
// changes (Live), taking only an edit that validates, so every check that
// can be made before a push is made here: a typo in the
// file must come back as a message that names the key and the line, not as a
// push that halts at tier 2 an hour later. Every key can be overridden by a
// MESHROLL_* environment variable, so that host tokens and per-environment
// addresses can stay out of the file.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
)

// Names and defaults of the configuration. They are constants so that the
// CLI's help text, the docs and the loader cannot disagree.
const (
	// EnvPrefix starts every environment variable that overrides a key:
	// push.retry_budget is MESHROLL_PUSH_RETRY_BUDGET, and machine edge-1's
	// host is MESHROLL_MACHINES_EDGE_1_HOST ('.', '-' and the key separator
	// all become '_').
	EnvPrefix = "MESHROLL"
	// EnvConfig names the file to read when no --config flag is given, so
	// that a service unit can point the worker at its file without flags.
	EnvConfig = "MESHROLL_CONFIG"
	// DefaultPath is read when neither --config nor MESHROLL_CONFIG is set:
	// the file sits at the root of the repository meshroll is run from.
	DefaultPath = "mesh.yaml"
	// DefaultStateDir is where local state goes unless state_dir says
	// otherwise; it is relative so that two checkouts never share state.
	DefaultStateDir = ".meshroll"
	// DefaultTemporalAddress is the Temporal frontend of a local dev server.
	DefaultTemporalAddress = "127.0.0.1:7233"
	// DefaultTemporalNamespace is the namespace a Temporal dev server
	// creates.
	DefaultTemporalNamespace = "default"
	// DefaultMain is the package built when a module names none: the
	// module's path itself.
	DefaultMain = "."
	// DefaultRegistryRepository is the path images go under in the registry.
	DefaultRegistryRepository = "meshroll"
	// DefaultRegistryListen is where the worker's embedded registry serves
	// when registry.address is empty.
	DefaultRegistryListen = "127.0.0.1:5000"
	// DefaultDeploymentName is the Worker Deployment the worker joins when
	// worker.versioning is enabled and names none.
	DefaultDeploymentName = "meshroll"
	// DefaultWebhookMaxBody is the largest delivery the merge receiver
	// reads when worker.webhook_max_body is unset: GitHub caps its
	// payloads at 25 MB, but a push of a few commits is a few kilobytes.
	DefaultWebhookMaxBody = "1MiB"
	// DefaultTracingServiceName is the service.name on the worker's spans.
	DefaultTracingServiceName = "meshroll-worker"
	// Builder kinds of Module.Builder.
	BuilderGo      = "go"
	BuilderCommand = "command"
)

// ErrUnknownModule is wrapped by Targets when asked about a module the config
// does not declare, so that an activity can turn it into a non-retryable
// meshapi.ErrUnknownModule instead of retrying a request that can never
// succeed.
var ErrUnknownModule = errors.New("unknown module")

// Config is the whole of mesh.yaml after environment overrides. It is plain
// data so that tests and tools can build one directly and call Validate.
type Config struct {
	// Temporal says where the worker and the CLI find the Temporal service.
	Temporal Temporal `mapstructure:"temporal"`
	// StateDir holds local state (default ".meshroll").
	StateDir string `mapstructure:"state_dir"`
	// Push bounds every push; it becomes the meshapi.PushPolicy a plan
	// starts with.
	Push Push `mapstructure:"push"`
	// Catalogue says where builds are recorded.
	Catalogue Catalogue `mapstructure:"catalogue"`
	// Registry is where images are pushed and host agents pull them from.
	Registry Registry `mapstructure:"registry"`
	// Modules are the buildable units, by name.
	Modules map[string]Module `mapstructure:"modules"`
	// Machines are the hosts pushed to, by name.
	Machines map[string]Machine `mapstructure:"machines"`
	// Tiers bounds how each tier is pushed: its batch size, failure budget
	// and bake time. A tier not listed takes DefaultTierPolicy. Read it
	// through Rollout.
	Tiers map[int]TierPolicy `mapstructure:"tiers"`
	// Worker is how the worker process is observed and upgraded; none of
	// it changes what a plan does.
	Worker Worker `mapstructure:"worker"`
	// Analysis declares the checks a tier waits on before the next starts
	// (tiers.<n>.analysis): where metrics are read and what they must say.
	// Parsed and validated; not yet run (issue 18 continues).
	Analysis Analysis `mapstructure:"analysis"`
	// Windows are the deployment windows: when plans may push (allow) and
	// may not (deny). Deny wins; with any allow window, plans push only
	// inside one. Read it through DeployWindows.
	Windows []Window `mapstructure:"windows"`
	// Notify is where plans send their events (notify.targets), by
	// webhook or to Slack.
	Notify Notify `mapstructure:"notify"`
	// Enroll is what machines admitted through enrollment run (package
	// enroll); the worker's endpoint for their asks is worker.enroll_listen.
	Enroll Enroll `mapstructure:"enroll"`

	// path is the file the config was read from, so that Validate on a
	// loaded config still names it.
	path string
	// origins is where each key is in that file, so that Invalid says it.
	origins origins
}

// Temporal is how to reach the Temporal service. It is configurable because
// a dev server, a shared cluster and Temporal Cloud all live elsewhere.
type Temporal struct {
	// Address is the frontend's host:port (default 127.0.0.1:7233).
	Address string `mapstructure:"address"`
	// Namespace holds meshroll's workflows (default "default").
	Namespace string `mapstructure:"namespace"`
	// TaskQueue is where the worker polls (default meshapi.DefaultTaskQueue),
	// so two meshes can share a namespace without stealing each other's
	// tasks.
	TaskQueue string `mapstructure:"task_queue"`
	// TLS connects over TLS, with a client certificate for mTLS (Temporal
	// Cloud's certificate auth, or a self-hosted cluster that asks for one).
	TLS TemporalTLS `mapstructure:"tls"`
	// APIKey authenticates with a Temporal Cloud API key (implies TLS).
	// Put it in MESHROLL_TEMPORAL_API_KEY, not the file; it is never logged.
	APIKey secret.String `mapstructure:"api_key"`
	// GrpcCompression is how requests to the frontend are compressed:
	// "none", "gzip" (the SDK's default), or "auto" / empty: none when
	// Address is a loopback address, where gzip costs CPU and saves
	// nothing, gzip elsewhere. Read it through Compression.
	GrpcCompression string `mapstructure:"grpc_compression"`
	// UIURL is the base URL of the Temporal Web UI that shows this
	// namespace, such as https://temporal.example.com: the fleet page links
	// each plan to its page there. Empty: no links (the dev stack sets its
	// own Web UI's).
	UIURL string `mapstructure:"ui_url"`
}

// Values of Temporal.GrpcCompression.
const (
	CompressionAuto = "auto"
	CompressionNone = "none"
	CompressionGzip = "gzip"
)

// Compression is the compression the client uses: GrpcCompression
// resolved, CompressionNone or CompressionGzip.
func (t Temporal) Compression() string {
	switch t.GrpcCompression {
	case CompressionNone, CompressionGzip:
		return t.GrpcCompression
	}
	if t.Local() {
		return CompressionNone
	}
	return CompressionGzip
}

// Local reports whether Address is on this machine (a loopback address or
// localhost): a dev server, most likely the dev stack's, rather than a
// cluster someone else runs.
func (t Temporal) Local() bool {
	host, _, err := net.SplitHostPort(t.Address)
	if err != nil {
		host = t.Address
	}
	return Loopback(host)
}

// TemporalTLS is how to reach a Temporal frontend over TLS. Any field set
// turns TLS on.
type TemporalTLS struct {
	// CAFile is a PEM bundle of CAs for the server's certificate (empty:
	// the system's roots).
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are the client certificate and key for mTLS.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ServerName overrides the name checked on the server's certificate.
	ServerName string `mapstructure:"server_name"`
	// Enabled turns TLS on with nothing else set (system roots).
	Enabled bool `mapstructure:"enabled"`
}

// On reports whether TLS is asked for.
func (t TemporalTLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// Push holds the timeouts of a push. They are in the file rather than in
// code because how long a container takes to start, and how long a host may
// be unreachable before its tier halts, depend on the mesh.
type Push struct {
	// RunningTimeout is how long a host may take to report the declared
	// containers running (default 5m). Written as a duration: "90s", "5m".
	RunningTimeout time.Duration `mapstructure:"running_timeout"`
	// RetryBudget is how long an unreachable host is retried before the
	// push fails (default 2m).
	RetryBudget time.Duration `mapstructure:"retry_budget"`
	// LocalActivity runs each push as a local activity inside the machine
	// workflow's task that took the request (default false: a regular
	// activity). It saves the server round trips of scheduling an
	// activity task and of the workflow task on its completion: a push
	// costs the request's signal, one workflow task and the answer's
	// signal. What it gives up: a push is no pending activity in the Web
	// UI (only a marker once it ends); a worker that dies mid-push is
	// found when the workflow task times out, not by a missed activity
	// heartbeat; a long push (a min_healthy to wait out), and the pushes
	// queued behind it, hold one workflow task open, which the SDK
	// heartbeats past its timeout, and the machine workflow's queries,
	// new requests and withdrawals wait for that task's end or next
	// heartbeat. Each push request carries the setting of the worker that
	// handed it over, so a change reaches machine workflows already
	// running at their next push.
	LocalActivity bool `mapstructure:"local_activity"`
	// RelayAbove is the most machines a plan hears itself; a larger plan
	// hears its answers through relays (meshapi.RelayAbove, the default,
	// says why and at what cost).
	RelayAbove int `mapstructure:"relay_above"`
	// RehandAfter is how long a plan's tier hears no answer before it
	// hands its unanswered pushes to their machine workflows again, as
	// a machine workflow terminated by hand lost them (default 10m,
	// meshapi.RehandAfter says why; it doubles after each quiet hand-over,
	// up to an hour).
	RehandAfter time.Duration `mapstructure:"rehand_after"`
	// HandWindow is the most pushes of a batch a plan has handed over and
	// not yet answered at once; a larger batch is handed over as answers
	// make room (default 1000, meshapi.HandWindow says why).
	HandWindow int `mapstructure:"hand_window"`
	// MaxUnavailable is the fleet's budget: how many machines, a count
	// (1) or a percentage of every machine the file names ("5%"), may be
	// unavailable at once across every plan, batch and rollback, a
	// machine being unavailable from its push's send until it is healthy,
	// failed or put back. Unset (0): no fleet-wide bound, only each
	// tier's max_parallel. The machine workflows enforce it with a lease
	// of one fleet budget workflow, so concurrent plans cannot race it.
	MaxUnavailable Amount `mapstructure:"max_unavailable"`
}

// Catalogue is where the worker records builds. Several workers share one
// only through PostgreSQL.
type Catalogue struct {
	// DSN is "sqlite:<path>" or a postgres:// URL. Empty means SQLite in the
	// state directory (<state_dir>/catalogue.db). Put a password in
	// MESHROLL_CATALOGUE_DSN rather than in the file; it is never logged.
	DSN string `mapstructure:"dsn"`
}

// Registry is the OCI registry builds are pushed to. With no address the
// worker serves an embedded registry on Listen, its blobs and manifests in
// the state directory, which is the development default.
type Registry struct {
	// Address is host:port or an http(s):// URL of the registry; empty means
	// the embedded one.
	Address string `mapstructure:"address"`
	// Username and Password (basic auth, or exchanged for a token), or
	// Token (a bearer token as is). Put secrets in MESHROLL_REGISTRY_*
	// variables; they are never logged.
	Username string        `mapstructure:"username"`
	Password secret.String `mapstructure:"password"`
	Token    secret.String `mapstructure:"token"`
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool `mapstructure:"insecure"`
	// CAFile is a PEM bundle trusted for the registry's certificate.
	CAFile string `mapstructure:"ca_file"`
	// Repository is the path images go under: <address>/<repository>/<module>
	// (default "meshroll").
	Repository string `mapstructure:"repository"`
	// Listen is where the embedded registry serves (default 127.0.0.1:5000).
	// Beyond loopback it needs Username and Password, which it then asks
	// of every request (the worker's pushes use them).
	Listen string `mapstructure:"listen"`
	// PullUsername and PullPassword are what the embedded registry lets
	// pull and nothing else: the hosts' credential (each agent's
	// --registry-username and --registry-password).
	PullUsername string        `mapstructure:"pull_username"`
	PullPassword secret.String `mapstructure:"pull_password"`
	// Deletes turns on the embedded registry's deletes (the distribution
	// spec's content management). Off by default: meshroll never deletes,
	// and a deleted image is one a machine can no longer pull.
	Deletes bool `mapstructure:"deletes"`
}

// Machine is one host meshroll pushes to.
type Machine struct {
	// Host is the base URL of the host API, http or https.
	Host string `mapstructure:"host"`
	// Tier orders pushes: every machine of a tier converges before the next
	// tier starts, lowest first, so early tiers are the canaries. A machine
	// the file gives no tier is on the lowest-numbered tier whose select
	// matches its Labels (ResolveTiers); a tier the file gives wins.
	Tier int `mapstructure:"tier"`
	// Labels say what the machine is (its site, ring, hardware), so that a
	// tier can select its machines (tiers.<n>.select) and an operator can
	// pick machines with --selector. Keys and values follow Kubernetes'
	// label rules (package selector).
	Labels map[string]string `mapstructure:"labels"`
	// TierBySelector says the file gives the machine no tier: Tier is the
	// one its labels select, once ResolveTiers has run (Load runs it).
	TierBySelector bool `mapstructure:"-"`
	// Modules are the modules the machine runs, in the order its
	// declarations list them.
	Modules []string `mapstructure:"modules"`
	// Token is the bearer token for the host API. It is never logged (see
	// package secret). Set it with MESHROLL_MACHINES_<NAME>_TOKEN rather
	// than in the file.
	Token secret.String `mapstructure:"token"`
	// CAFile is a PEM bundle of the CAs that sign the host's TLS
	// certificate, for https hosts whose certificate a private CA issued.
	// Empty means the system's roots.
	CAFile string `mapstructure:"ca_file"`
	// Env is added to the environment of every container of the machine,
	// over its module's env (the machine's value wins): what differs by
	// machine (a site, a peer's address) without a module per machine.
	// Like module env it is kept in workflow histories.
	Env map[string]string `mapstructure:"env"`
	// Admitted says the file does not name the machine: an operator
	// admitted it through enrollment (Config.Admit).
	Admitted bool `mapstructure:"-"`
}

// Default returns the defaults with no modules and no machines: the base
// that Load fills from the file, and a start for tests that build a config
// in code.
func Default() *Config {
	return &Config{
		Temporal: Temporal{
			Address:   DefaultTemporalAddress,
			Namespace: DefaultTemporalNamespace,
			TaskQueue: meshapi.DefaultTaskQueue,
		},
		StateDir: DefaultStateDir,
		Registry: Registry{Repository: DefaultRegistryRepository, Listen: DefaultRegistryListen},
		Push: Push{
			RunningTimeout: meshapi.DefaultPushPolicy.RunningTimeout,
			RetryBudget:    meshapi.DefaultPushPolicy.RetryBudget,
			RelayAbove:     meshapi.RelayAbove,
			RehandAfter:    meshapi.RehandAfter,
			HandWindow:     meshapi.HandWindow,
		},
		Modules:  map[string]Module{},
		Machines: map[string]Machine{},
		Tiers:    map[int]TierPolicy{},
		Analysis: Analysis{Providers: map[string]Provider{}, Checks: map[string]Check{}},
		Worker: Worker{
			Tracing:    Tracing{ServiceName: DefaultTracingServiceName},
			Versioning: Versioning{DeploymentName: DefaultDeploymentName},
		},
	}
}

// ResolvePath picks the config file: the --config flag if given, else
// $MESHROLL_CONFIG, else mesh.yaml. It is separate from Load so that the CLI
// can print which file it means before reading it.
func ResolvePath(flag string) string {
	if flag != "" {
		return flag
	}
	if p := os.Getenv(EnvConfig); p != "" {
		return p
	}
	return DefaultPath
}

// Load reads the config file named by ResolvePath(path), applies MESHROLL_*
// environment overrides and validates the result. A config that does not
// validate is not returned: the error is a *ValidationError listing every
// problem at once, so that one edit fixes them all.
func Load(path string) (*Config, error) {
	p := ResolvePath(path)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("mesh config %s not found (pass another path with --config or %s): %w", p, EnvConfig, err)
	}
	if err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", p, err)
	}
	return Parse(p, data)
}

// Parse is Load for a file already in memory; name is used in errors only.
// Environment overrides apply as in Load. It exists so that tests, and tools
// that get the file from elsewhere (a git blob), need no file on disk.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data)
}

// ModuleNames returns the module names sorted, for stable output and
// iteration.
func (c *Config) ModuleNames() []string { return sortedKeys(c.Modules) }

// MachineNames returns the machine names sorted, for stable output and
// iteration.
func (c *Config) MachineNames() []string { return sortedKeys(c.Machines) }

// Targets lists the machines that run module, sorted by tier and then by
// name: the order a plan pushes them in. Each target's Modules keep the
// machine's order from the config, because that is the order its
// declaration lists containers in; each carries its group in its tier
// (GroupOf). An undeclared module is an error wrapping
// ErrUnknownModule.
func (c *Config) Targets(module string) ([]meshapi.Target, error) {
	if _, ok := c.Modules[module]; !ok {
		return nil, fmt.Errorf("%w %q; the mesh config declares %v", ErrUnknownModule, module, c.ModuleNames())
	}
	targets := []meshapi.Target{}
	for _, name := range c.MachineNames() {
		m := c.Machines[name]
		if slices.Contains(m.Modules, module) {
			targets = append(targets, meshapi.Target{Machine: name, Tier: m.Tier, Modules: slices.Clone(m.Modules), Alone: c.IsControlPlane(name), Group: c.GroupOf(name)})
		}
	}
	sort.SliceStable(targets, func(i, j int) bool { return targets[i].Tier < targets[j].Tier })
	return targets, nil
}

// PushPolicy is the policy a plan starts with. Zero fields take meshapi's
// defaults, so a config built in code without Push still pushes sensibly.
func (c *Config) PushPolicy() meshapi.PushPolicy {
	return meshapi.PushPolicy{RunningTimeout: c.Push.RunningTimeout, RetryBudget: c.Push.RetryBudget}.WithDefaults()
}

// IsControlPlane reports whether machine runs a control_plane module. Such a
// machine is pushed last and is where operators look first when meshroll
// itself misbehaves. An unknown machine is not a control plane.
func (c *Config) IsControlPlane(machine string) bool {
	return len(c.controlPlaneModules(machine)) > 0
}

// controlPlaneModules returns machine's control_plane modules in its order.
func (c *Config) controlPlaneModules(machine string) []string {
	var out []string
	for _, mod := range c.Machines[machine].Modules {
		if c.Modules[mod].ControlPlane {
			out = append(out, mod)
		}
	}
	return out
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// CatalogueDSN is the catalogue's DSN: catalogue.dsn, or SQLite in the state
// directory (taken relative to configDir). The worker opens it, and the
// starter reads the fleet picture from it, so both must resolve it alike.
func (c *Config) CatalogueDSN(configDir string) string {
	if c.Catalogue.DSN != "" {
		return c.Catalogue.DSN
	}
	return "sqlite:" + filepath.Join(c.ResolvedStateDir(configDir), "catalogue.db")
}

// ResolvedStateDir is state_dir, taken relative to configDir when it is
// not absolute.
func (c *Config) ResolvedStateDir(configDir string) string {
	if filepath.IsAbs(c.StateDir) {
		return c.StateDir
	}
	return filepath.Join(configDir, c.StateDir)
}
