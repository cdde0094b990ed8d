package config

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
	"github.com/meshroll/meshroll/internal/window"
)

// Problem is one thing wrong with a config. Key is the dotted path of the
// offending key (machines.edge-1.tier) so that the operator can find it, and
// so that tests can match problems without parsing prose.
type Problem struct {
	Key     string
	Message string
}

// String is the problem as Error prints it.
func (p Problem) String() string { return p.Key + ": " + p.Message }

// ValidationError lists every problem of a config at once, sorted by key, so
// that fixing a file takes one round trip instead of one per typo.
type ValidationError struct {
	// Path is the file the config came from; empty for a config built in
	// code.
	Path     string
	Problems []Problem
}

// Error prints one problem per line, under a line naming the file.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("mesh config")
	if e.Path != "" {
		b.WriteString(" " + e.Path)
	}
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(&b, ": %d %s:", len(e.Problems), noun)
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// newValidationError sorts ps and wraps them, or returns nil when there are
// none (never a typed nil inside an error).
func newValidationError(path string, ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	ps = append([]Problem(nil), ps...)
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Key != ps[j].Key {
			return ps[i].Key < ps[j].Key
		}
		return ps[i].Message < ps[j].Message
	})
	return &ValidationError{Path: path, Problems: ps}
}

// Validate checks the config's meaning: names, references between modules
// and machines, tiers and control-plane placement, URLs, timeouts, health
// checks and tier policies. It returns a *ValidationError naming every
// problem, or nil. Load also checks the file's form (unknown and duplicate
// keys, values of the wrong type), which a Config built in code cannot get
// wrong.
// validateEmbedded holds the embedded registry to loopback unless it asks
// for credentials: anyone who reached it could push, pull, and (with
// deletes on) delete what the machines pull.
func (r Registry) validateEmbedded(ps *problemList) {
	if r.Address != "" {
		if r.PullUsername != "" || r.PullPassword != "" || r.Deletes {
			ps.add("registry.address", "pull_username, pull_password and deletes are the embedded registry's; the registry at address has its own")
		}
		return
	}
	if (r.PullUsername == "") != (r.PullPassword == "") {
		ps.add("registry.pull_username", "pull_username and pull_password go together (the hosts' credential; put the password in MESHROLL_REGISTRY_PULL_PASSWORD)")
	}
	if r.PullUsername != "" && r.Username == "" {
		ps.add("registry.pull_username", "a pull credential needs the worker's too: set registry.username and registry.password, or the registry lets anyone push")
	}
	if r.Username != "" && r.Password == "" {
		ps.add("registry.password", "the embedded registry asks for username %q with a password: set MESHROLL_REGISTRY_PASSWORD", r.Username)
	}
	host, _, err := net.SplitHostPort(r.Listen)
	if err != nil || Loopback(host) || r.Username != "" {
		return
	}
	ps.add("registry.listen", "%s reaches beyond loopback, and the embedded registry asks no credentials: anyone who reaches it could push, "+
		"and pull or replace what the machines run. Set registry.username and registry.password (MESHROLL_REGISTRY_PASSWORD) for the worker, "+
		"and registry.pull_username and registry.pull_password for the hosts, or listen on 127.0.0.1", r.Listen)
}

func (c *Config) Validate() error {
	return newValidationError(c.path, c.problems(nil))
}

// Invalid is Validate's error for problems found by a check that needs
// more than the config (the worker's look at the module sources on disk):
// every problem under the file's name, each saying where its key is in the
// file or which variable set it, as Load says its own. nil when ps is
// empty.
func (c *Config) Invalid(ps ...Problem) error {
	out := make([]Problem, len(ps))
	for i, p := range ps {
		p.Message += c.origins.where(p.Key)
		out[i] = p
	}
	return newValidationError(c.path, out)
}

// skip tells problems which keys could not be read from the file. Their
// values in the Config are zero, and a problem about the zero value would
// only repeat, less clearly, the problem already reported about the file.
type skip struct {
	leaf map[string]bool // these keys
	tree map[string]bool // everything under these keys
	// modules is set when the modules section could not be read, so
	// machines' references to modules cannot be checked.
	modules bool
	// machineModules is set when some machine's modules could not be read,
	// so "no machine runs it" cannot be decided.
	machineModules bool
	// machineTiers is set when some machine's tier could not be read, so
	// neither "no machine is on it" nor a tier's size can be decided.
	machineTiers bool
}

func (s *skip) has(key string) bool {
	if s == nil {
		return false
	}
	if s.leaf[key] {
		return true
	}
	for p := range s.tree {
		if strings.HasPrefix(key, p+".") {
			return true
		}
	}
	return false
}

type problemList struct {
	skip *skip
	list []Problem
}

func (l *problemList) add(key, format string, args ...any) {
	if l.skip.has(key) {
		return
	}
	l.list = append(l.list, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

// secretOnce refuses a secret given both as key's value and in the file
// key_file: which one is meant would be a guess. what names the secret,
// as names key, in the message.
func (l *problemList) secretOnce(key, as, what string, value secret.String, file string) {
	if value != "" && file != "" {
		l.add(key+"_file", "give %s either as %s or as a file, not both", what, as)
	}
}

// problems is Validate without the wrapping, skipping what sk says could not
// be read.
func (c *Config) problems(sk *skip) []Problem {
	ps := &problemList{skip: sk}
	c.windowProblems(ps)

	for _, f := range []struct{ key, val, def string }{
		{"temporal.address", c.Temporal.Address, DefaultTemporalAddress},
		{"temporal.namespace", c.Temporal.Namespace, DefaultTemporalNamespace},
		{"temporal.task_queue", c.Temporal.TaskQueue, meshapi.DefaultTaskQueue},
		{"state_dir", c.StateDir, DefaultStateDir},
	} {
		if strings.TrimSpace(f.val) == "" {
			ps.add(f.key, "must not be empty (leave it out for the default, %s)", f.def)
		}
	}
	for _, f := range []struct {
		key string
		val fmt.Stringer
		pos bool
	}{
		{"push.running_timeout", c.Push.RunningTimeout, c.Push.RunningTimeout > 0},
		{"push.retry_budget", c.Push.RetryBudget, c.Push.RetryBudget > 0},
	} {
		if !f.pos {
			ps.add(f.key, "must be a positive duration such as 90s or 5m, got %s", f.val)
		}
	}
	c.fleetBudgetProblems(ps)
	if c.Push.RehandAfter < 0 {
		ps.add("push.rehand_after", "must be a positive duration such as 90s or 5m (leave it out for the default, %s), got %s", meshapi.RehandAfter, c.Push.RehandAfter)
	}
	if c.Push.HandWindow < 0 {
		ps.add("push.hand_window", "must be a number of pushes, 1 or more (leave it out for the default, %d), got %d", meshapi.HandWindow, c.Push.HandWindow)
	}
	if c.Push.RelayAbove < 0 {
		ps.add("push.relay_above", "must be a number of machines, 1 or more (leave it out for the default, %d), got %d", meshapi.RelayAbove, c.Push.RelayAbove)
	}

	if len(c.Modules) == 0 {
		ps.add("modules", "no modules; declare at least one module to build and push")
	}
	switch c.Temporal.GrpcCompression {
	case "", CompressionAuto, CompressionNone, CompressionGzip:
	default:
		ps.add("temporal.grpc_compression", "unknown compression %q; want %s, %s or %s", c.Temporal.GrpcCompression, CompressionAuto, CompressionNone, CompressionGzip)
	}
	if u := c.Temporal.UIURL; u != "" {
		const want = "want the Temporal Web UI's base URL, such as https://temporal.example.com"
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			ps.add("temporal.ui_url", "%q is not an http or https URL with a host; %s", u, want)
		}
	}
	if (c.Temporal.TLS.CertFile == "") != (c.Temporal.TLS.KeyFile == "") {
		ps.add("temporal.tls", "cert_file and key_file go together (the client certificate and its key)")
	}
	if c.Registry.Token != "" && (c.Registry.Username != "" || c.Registry.Password != "") {
		ps.add("registry.token", "give either a token or a username and password, not both")
	}
	c.Registry.validateEmbedded(ps)
	if len(c.Machines) == 0 {
		ps.add("machines", "no machines; declare at least one machine to push to")
	}

	run := map[string]bool{}
	for _, m := range c.Machines {
		for _, mod := range m.Modules {
			run[mod] = true
		}
	}
	for _, mod := range c.Enroll.Modules {
		run[mod] = true
	}
	for _, name := range c.ModuleNames() {
		mod := c.Modules[name]
		key := "modules." + name
		if err := mesh.ValidName("module", name); err != nil {
			ps.add(key, "%v", err)
		}
		if strings.TrimSpace(mod.Repo) == "" {
			ps.add(key+".repo", "missing; name the git repository to build from (\".\" for this one)")
		}
		if mod.Source != "" {
			if u, err := url.Parse(mod.Source); err != nil || u.Scheme == "" || u.Host == "" || u.User != nil {
				ps.add(key+".source", "%q is not a URL without credentials, such as https://git.example.com/org/mesh", mod.Source)
			}
		}
		switch mod.Builder {
		case "", BuilderGo:
			if len(mod.Command) > 0 {
				ps.add(key+".command", "only the command builder runs a command; set builder: command or remove it")
			}
		case BuilderCommand:
			if len(mod.Command) == 0 {
				ps.add(key+".command", "missing; the command builder needs the command that pushes the image, such as [ko, build, --push]")
			}
		default:
			ps.add(key+".builder", "unknown builder %q; want %s or %s", mod.Builder, BuilderGo, BuilderCommand)
		}
		if !mesh.ValidNetwork(mod.Network) {
			ps.add(key+".network", "unknown network %q; want %s (the machine's own) or %s (an address on the engine's bridge)", mod.Network, mesh.NetworkHost, mesh.NetworkBridge)
		}
		healthProblems(ps, key+".health", mod.Health)
		settingsProblems(ps, key, mod)
		if !run[name] && (sk == nil || !sk.machineModules) {
			ps.add(key, "no machine runs it; add it to a machine's modules or remove it")
		}
	}

	for _, name := range c.MachineNames() {
		m := c.Machines[name]
		key := "machines." + name
		if err := mesh.ValidName("machine", name); err != nil {
			ps.add(key, "%v", err)
		}
		if msg := checkHost(m.Host); msg != "" {
			ps.add(key+".host", "%s", msg)
		}
		if m.Tier < 0 {
			ps.add(key+".tier", "must be a non-negative integer, got %d", m.Tier)
		}
		if len(m.Modules) == 0 {
			ps.add(key+".modules", "runs no modules; list the modules it runs, such as [host]")
		}
		c.moduleListProblems(ps, key+".modules", m.Modules, sk == nil || !sk.modules)
	}

	c.labelProblems(ps)
	c.placementProblems(ps)
	c.tierProblems(ps)
	c.groupProblems(ps)
	c.analysisProblems(ps)
	c.workerProblems(ps)
	c.notifyProblems(ps)
	c.enrollProblems(ps)
	return ps.list
}

// workerProblems checks the worker section: addresses that would only fail
// when the worker binds or exports, and names Temporal would refuse.
func (c *Config) workerProblems(ps *problemList) {
	w := c.Worker
	if w.MetricsListen != "" {
		if msg := checkListen(w.MetricsListen); msg != "" {
			ps.add("worker.metrics_listen", "%s", msg)
		}
	}
	if w.UIListen != "" {
		if msg := checkListen(w.UIListen); msg != "" {
			ps.add("worker.ui_listen", "%s", msg)
		} else if host, _, _ := net.SplitHostPort(w.UIListen); !Loopback(host) && w.UIToken == "" && w.UITokenFile == "" {
			ps.add("worker.ui_listen", "%q is not a loopback address and the fleet page has no token: it would show the whole fleet to anyone who reaches it; "+
				"set %s (or worker.ui_token_file), or listen on 127.0.0.1 and put your proxy in front", w.UIListen, envName("worker", "ui_token"))
		}
	}
	ps.secretOnce("worker.ui_token", "worker.ui_token", "the fleet page's token", w.UIToken, w.UITokenFile)
	c.webhookProblems(ps)
	if e := w.Tracing.OTLPEndpoint; e != "" {
		const want = "want the OTLP/HTTP collector's URL, such as http://otel-collector:4318"
		u, err := url.Parse(e)
		switch {
		case err != nil:
			ps.add("worker.tracing.otlp_endpoint", "does not parse as a URL; %s", want)
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add("worker.tracing.otlp_endpoint", "%q is not an http or https URL; %s", u.Redacted(), want)
		case u.Hostname() == "":
			ps.add("worker.tracing.otlp_endpoint", "%q has no host; %s", u.Redacted(), want)
		}
	}
	v := w.Versioning
	if msg := checkVersionName(v.DeploymentName); msg != "" {
		ps.add("worker.versioning.deployment_name", "%q %s", v.DeploymentName, msg)
	} else if strings.Contains(v.DeploymentName, ".") {
		ps.add("worker.versioning.deployment_name", "%q contains a dot, which Temporal puts between the deployment name and the build ID", v.DeploymentName)
	}
	if msg := checkVersionName(v.BuildID); v.BuildID != "" && msg != "" {
		ps.add("worker.versioning.build_id", "%q %s", v.BuildID, msg)
	}
}

// checkListen returns what is wrong with a host:port to listen on, or "".
func checkListen(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not host:port; want an address to listen on, such as 127.0.0.1:9090 or :9090", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q has no port number; want an address to listen on, such as %s:9090", addr, host)
	}
	return ""
}

// moduleListProblems checks a list of modules under key: none twice, and,
// when known is true (the modules section could be read), each one the
// config declares.
func (c *Config) moduleListProblems(ps *problemList, key string, mods []string, known bool) {
	seen := map[string]bool{}
	for _, mod := range mods {
		if seen[mod] {
			ps.add(key, "lists %q twice", mod)
			continue
		}
		seen[mod] = true
		if _, ok := c.Modules[mod]; !ok && known {
			ps.add(key, "unknown module %q; modules are %s", mod, orNone(c.ModuleNames()))
		}
	}
}

// checkVersionName returns what is wrong with a deployment name or build ID
// as Temporal takes them (at most 255 characters; the version's string form
// joins the two with a dot, so a deployment name has none), or "".
func checkVersionName(s string) string {
	switch {
	case len(s) > 255:
		return "is longer than 255 characters"
	case strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\n\r"):
		return "contains spaces"
	case strings.HasPrefix(s, "__"):
		return "starts with __, which Temporal reserves"
	}
	return ""
}

// placementProblems checks that every machine running a control_plane module
// is in a tier above every machine that runs none. Tiers are pushed lowest
// first, so this pushes meshroll's own controller only after the build has
// shown itself everywhere else.
func (c *Config) placementProblems(ps *problemList) {
	var (
		highest     string // a non-control-plane machine in the highest tier
		highestTier = -1
	)
	usable := func(name string) bool {
		return !ps.skip.has("machines."+name+".tier") && c.Machines[name].Tier >= 0 && !c.unplaced(name)
	}
	for _, name := range c.MachineNames() {
		if !usable(name) || c.IsControlPlane(name) {
			continue
		}
		if t := c.Machines[name].Tier; t > highestTier {
			highest, highestTier = name, t
		}
	}
	if highest == "" {
		return
	}
	for _, name := range c.MachineNames() {
		if !usable(name) {
			continue
		}
		cp := c.controlPlaneModules(name)
		if len(cp) > 0 && c.Machines[name].Tier <= highestTier {
			ps.add("machines."+name+".tier",
				"runs the control plane (%s) so must be in a tier above every other machine; %s is in tier %d",
				strings.Join(cp, ", "), highest, highestTier)
		}
	}
}

// checkHost returns what is wrong with a host API URL, or "".
func checkHost(host string) string {
	const want = "want the host API's base URL, such as http://10.0.0.5:7400"
	if strings.TrimSpace(host) == "" {
		return "missing; " + want
	}
	if !strings.Contains(host, "://") && !strings.Contains(host, "@") {
		return fmt.Sprintf("%q has no scheme; want the host API's base URL, such as http://%s", host, host)
	}
	u, err := url.Parse(host)
	if err != nil {
		// url's error quotes the URL, which may carry credentials.
		return "does not parse as a URL; " + want
	}
	shown := u.Redacted()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q is not an http or https URL; %s", shown, want)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Sprintf("%q has no host; %s", shown, want)
	case u.User != nil:
		return fmt.Sprintf("%q carries credentials; put the token in token (MESHROLL_MACHINES_<NAME>_TOKEN) instead", shown)
	}
	return ""
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// windowProblems checks the deployment windows: each is allow or deny (not
// both), its schedule parses as cron, its zone is known, and it lasts.
func (c *Config) windowProblems(ps *problemList) {
	for i, w := range c.Windows {
		key := fmt.Sprintf("windows[%d]", i)
		spec, specKey := w.Allow, key+".allow"
		switch {
		case w.Allow != "" && w.Deny != "":
			ps.add(key, "is both allow and deny; write two windows")
			continue
		case w.Deny != "":
			spec, specKey = w.Deny, key+".deny"
		case w.Allow == "":
			ps.add(key, "needs allow or deny: a cron schedule of when the window starts, such as \"0 18 * * FRI\"")
			continue
		}
		if err := window.CheckSpec(spec); err != nil {
			ps.add(specKey, "is not a cron schedule (minute hour day-of-month month day-of-week, or @daily and the like): %v", err)
		}
		if w.TimeZone != "" {
			if err := window.CheckZone(w.TimeZone); err != nil {
				ps.add(key+".time_zone", "is not a time zone (an IANA name such as Europe/Berlin, or UTC): %v", err)
			}
		}
		if w.Duration <= 0 {
			ps.add(key+".duration", "must be above zero, such as 8h")
		}
	}
}
