package config

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/viper"
	yaml "go.yaml.in/yaml/v3"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/secret"
)

// How the file is read. Two tools, because neither does the job alone:
//
//   - viper supplies the values, so that MESHROLL_* variables override any key
//     (AutomaticEnv). It is asked for one key at a time with Get, because
//     Unmarshal only consults the environment for keys it already knows,
//     lowercases map keys (env names) and, when a value has the wrong type,
//     fails with one opaque error instead of a list of problems.
//   - a yaml.v3 node walk supplies the form: unknown and duplicate keys, the
//     names of modules and machines as written, and line numbers. viper
//     refuses a file with a duplicate key outright, so duplicates are
//     reported and dropped before viper sees the file.
//
// viper's key separator is "::" rather than ".", because "." is allowed in
// module and machine names (mesh.ValidName) and viper would split a machine
// called web.prod into a machine "web" with a key "prod".
const keyDelim = "::"

// envReplacer turns a viper key into an environment variable name, as viper
// does with it under SetEnvKeyReplacer.
var envReplacer = strings.NewReplacer(keyDelim, "_", ".", "_", "-", "_")

// envName is the variable that overrides the key made of parts.
func envName(parts ...string) string {
	return envReplacer.Replace(strings.ToUpper(EnvPrefix + "_" + strings.Join(parts, keyDelim)))
}

// lookupEnv reports a variable the way viper sees it: set and non-empty.
func lookupEnv(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}

func newViper() *viper.Viper {
	v := viper.NewWithOptions(viper.KeyDelimiter(keyDelim))
	v.SetConfigType("yaml")
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(envReplacer)
	v.AutomaticEnv()
	d := Default()
	v.SetDefault("temporal::address", d.Temporal.Address)
	v.SetDefault("temporal::namespace", d.Temporal.Namespace)
	v.SetDefault("temporal::task_queue", d.Temporal.TaskQueue)
	v.SetDefault("state_dir", d.StateDir)
	v.SetDefault("push::running_timeout", d.Push.RunningTimeout)
	v.SetDefault("push::retry_budget", d.Push.RetryBudget)
	v.SetDefault("registry::repository", d.Registry.Repository)
	v.SetDefault("registry::listen", d.Registry.Listen)
	v.SetDefault("worker::tracing::service_name", d.Worker.Tracing.ServiceName)
	v.SetDefault("worker::versioning::deployment_name", d.Worker.Versioning.DeploymentName)
	return v
}

// Known keys, taken from the mapstructure tags (or, for the probes, which
// are mesh's wire types, the json tags) so that adding a field to a struct
// is all it takes to make its key known.
var (
	topKeys      = tagKeys(reflect.TypeFor[Config]())
	temporalKeys = tagKeys(reflect.TypeFor[Temporal]())
	tlsKeys      = tagKeys(reflect.TypeFor[TemporalTLS]())
	pushKeys     = tagKeys(reflect.TypeFor[Push]())
	catKeys      = tagKeys(reflect.TypeFor[Catalogue]())
	regKeys      = tagKeys(reflect.TypeFor[Registry]())
	moduleKeys   = tagKeys(reflect.TypeFor[Module]())
	machineKeys  = tagKeys(reflect.TypeFor[Machine]())
	workerKeys   = tagKeys(reflect.TypeFor[Worker]())
	tracingKeys  = tagKeys(reflect.TypeFor[Tracing]())
	versionKeys  = tagKeys(reflect.TypeFor[Versioning]())
	healthKeys   = tagKeys(reflect.TypeFor[Health]())
	httpKeys     = tagKeys(reflect.TypeFor[mesh.HTTPProbe]())
	tcpKeys      = tagKeys(reflect.TypeFor[mesh.TCPProbe]())
	tierKeys     = tagKeys(reflect.TypeFor[TierPolicy]())
	windowKeys   = tagKeys(reflect.TypeFor[Window]())

	analysisKeys  = tagKeys(reflect.TypeFor[Analysis]())
	providerKeys  = tagKeys(reflect.TypeFor[Provider]())
	promKeys      = tagKeys(reflect.TypeFor[Prometheus]())
	basicAuthKeys = tagKeys(reflect.TypeFor[BasicAuth]())
	provTLSKeys   = tagKeys(reflect.TypeFor[ProviderTLS]())
	webKeys       = tagKeys(reflect.TypeFor[Web]())
	checkKeys     = tagKeys(reflect.TypeFor[Check]())
)

func tagKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		tag := t.Field(i).Tag
		k, ok := tag.Lookup("mapstructure")
		if !ok {
			k, _, _ = strings.Cut(tag.Get("json"), ",")
		}
		if k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// loader carries what parse learns about the file while decoding it.
type loader struct {
	path  string
	v     *viper.Viper
	probs []Problem
	skip  skip
	// lines maps a dotted key to the line of that key in the file.
	lines map[string]int
	// nodes maps a dotted key to its value node, to quote values as written.
	nodes map[string]*yaml.Node
	// envs maps a dotted key to the variable that overrides it.
	envs map[string]string
}

func parse(path string, data []byte) (*Config, error) {
	l := &loader{
		path:  path,
		skip:  skip{leaf: map[string]bool{}, tree: map[string]bool{}},
		lines: map[string]int{},
		nodes: map[string]*yaml.Node{},
		envs:  map[string]string{},
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", path, err)
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = resolve(doc.Content[0])
	}
	if !isNull(root) && root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("mesh config %s: line %d: the top level must be a mapping of %s", path, root.Line, strings.Join(topKeys, ", "))
	}

	clean := data
	if l.dedupe(&doc, "") {
		out, err := yaml.Marshal(&doc)
		if err != nil {
			return nil, fmt.Errorf("mesh config %s: re-encoding without duplicate keys: %w", path, err)
		}
		clean = out
	}
	l.v = newViper()
	if err := l.v.ReadConfig(bytes.NewReader(clean)); err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", path, err)
	}

	c := l.decode(root)
	c.path = path
	c.origins = origins{lines: l.lines, envs: l.envs}
	probs := l.probs
	for _, p := range c.problems(&l.skip) {
		p.Message += l.where(p.Key)
		probs = append(probs, p)
	}
	if err := newValidationError(path, probs); err != nil {
		return nil, err
	}
	return c, nil
}

// problem records a problem about the file, saying where the key is.
func (l *loader) problem(key, format string, args ...any) {
	l.probs = append(l.probs, Problem{Key: key, Message: fmt.Sprintf(format, args...) + l.where(key)})
}

// bad records a problem with a value and marks the key unreadable, so that
// Validate does not complain again about the zero value left in its place.
func (l *loader) bad(key, format string, args ...any) {
	l.problem(key, format, args...)
	l.skip.leaf[key] = true
}

// where says where key's value comes from (see origins.where).
func (l *loader) where(key string) string { return origins{lines: l.lines, envs: l.envs}.where(key) }

// origins is where the keys of a file are: the line of each, and the
// variable that overrides it. The loader fills it; a loaded Config keeps
// it, for problems found after Load (Config.Invalid).
type origins struct {
	lines map[string]int
	envs  map[string]string
}

// where says where key's value comes from: " (from MESHROLL_X)" when a
// variable overrides it, else " (line N)" of the key or of its nearest
// ancestor in the file, else "".
func (o origins) where(key string) string {
	if name := o.envs[key]; name != "" {
		if _, ok := lookupEnv(name); ok {
			return " (from " + name + ")"
		}
	}
	for k := key; ; {
		if line, ok := o.lines[k]; ok {
			return fmt.Sprintf(" (line %d)", line)
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return ""
		}
		k = k[:i]
	}
}

func joinKey(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// dedupe drops the second and later occurrences of a key in every mapping,
// reporting each, and says whether it dropped any.
func (l *loader) dedupe(n *yaml.Node, path string) bool {
	changed := false
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			changed = l.dedupe(c, path) || changed
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			changed = l.dedupe(c, fmt.Sprintf("%s[%d]", path, i)) || changed
		}
	case yaml.MappingNode:
		first := map[string]int{}
		kept := make([]*yaml.Node, 0, len(n.Content))
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode {
				if line, ok := first[k.Value]; ok {
					// Not l.problem: the line to show is this one, not the
					// first's.
					l.probs = append(l.probs, Problem{
						Key:     joinKey(path, k.Value),
						Message: fmt.Sprintf("duplicate key: defined at line %d and again at line %d; only one may stay", line, k.Line),
					})
					changed = true
					continue
				}
				first[k.Value] = k.Line
			}
			kept = append(kept, k, v)
			changed = l.dedupe(v, joinKey(path, k.Value)) || changed
		}
		n.Content = kept
	}
	return changed
}

// entry is one key of a mapping and its value (aliases resolved).
type entry struct{ key, val *yaml.Node }

// entries lists a mapping's keys in file order, with the keys of merged
// mappings (<<: *anchor) after them; an explicit key wins over a merged one,
// and an earlier merged mapping over a later one, as in YAML.
func entries(n *yaml.Node) []entry {
	var own, merged []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if v.Kind == yaml.SequenceNode {
				for _, s := range v.Content {
					if s = resolve(s); s.Kind == yaml.MappingNode {
						merged = append(merged, entries(s)...)
					}
				}
			} else if v.Kind == yaml.MappingNode {
				merged = append(merged, entries(v)...)
			}
			continue
		}
		own = append(own, entry{k, v})
	}
	seen := map[string]bool{}
	out := make([]entry, 0, len(own)+len(merged))
	for _, e := range append(own, merged...) {
		if !seen[e.key.Value] {
			seen[e.key.Value] = true
			out = append(out, e)
		}
	}
	return out
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// section checks that n, the value of key (viper key parts), is a mapping
// (or empty) whose keys are all in known (any keys if known is nil), and
// returns its entries. ok is false when its contents cannot be used.
func (l *loader) section(n *yaml.Node, key string, parts []string, what string, known []string) (es []entry, ok bool) {
	if len(parts) > 0 {
		name := envName(parts...)
		if _, set := lookupEnv(name); set {
			// viper then ignores everything under the key, file and
			// variables alike.
			l.problem(key, "%s is set, which hides everything under %s from viper; unset it and override single keys (%s_<KEY>)", name, key, name)
			l.skip.tree[key] = true
			return nil, false
		}
	}
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		l.problem(key, "must be a mapping of %s, got %s", what, describe(n))
		l.skip.tree[key] = true
		return nil, false
	}
	es = entries(n)
	for _, e := range es {
		k := joinKey(key, e.key.Value)
		l.lines[k] = e.key.Line
		l.nodes[k] = e.val
		if known != nil && !slices.Contains(known, e.key.Value) {
			l.problem(k, "unknown key; known keys: %s", strings.Join(known, ", "))
		}
	}
	return es, true
}

// describe names a node's kind and value for a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "nothing"
}

func (l *loader) decode(root *yaml.Node) *Config {
	c := Default()
	top, _ := l.section(root, "", nil, strings.Join(topKeys, ", "), topKeys)
	val := func(key string) *yaml.Node { return child(top, key) }

	tsec, _ := l.section(val("temporal"), "temporal", []string{"temporal"}, strings.Join(temporalKeys, ", "), temporalKeys)
	c.Temporal.Address = l.str("temporal", "address")
	c.Temporal.Namespace = l.str("temporal", "namespace")
	c.Temporal.TaskQueue = l.str("temporal", "task_queue")
	c.Temporal.GrpcCompression = l.str("temporal", "grpc_compression")
	c.Temporal.APIKey = secret.String(l.str("temporal", "api_key"))
	c.Temporal.UIURL = l.str("temporal", "ui_url")
	var tlsNode *yaml.Node
	for _, e := range tsec {
		if e.key.Value == "tls" {
			tlsNode = e.val
		}
	}
	l.section(tlsNode, "temporal.tls", []string{"temporal", "tls"}, strings.Join(tlsKeys, ", "), tlsKeys)
	c.Temporal.TLS = TemporalTLS{
		CAFile:     l.str("temporal", "tls", "ca_file"),
		CertFile:   l.str("temporal", "tls", "cert_file"),
		KeyFile:    l.str("temporal", "tls", "key_file"),
		ServerName: l.str("temporal", "tls", "server_name"),
		Enabled:    l.boolean("temporal", "tls", "enabled"),
	}
	c.StateDir = l.str("state_dir")
	l.section(val("push"), "push", []string{"push"}, strings.Join(pushKeys, ", "), pushKeys)
	c.Push.RunningTimeout = l.duration("push", "running_timeout")
	c.Push.RetryBudget = l.duration("push", "retry_budget")
	c.Push.LocalActivity = l.boolean("push", "local_activity")
	l.section(val("catalogue"), "catalogue", []string{"catalogue"}, strings.Join(catKeys, ", "), catKeys)
	c.Catalogue.DSN = l.str("catalogue", "dsn")
	l.section(val("registry"), "registry", []string{"registry"}, strings.Join(regKeys, ", "), regKeys)
	c.Registry = Registry{
		Address:    l.str("registry", "address"),
		Username:   l.str("registry", "username"),
		Password:   secret.String(l.str("registry", "password")),
		Token:      secret.String(l.str("registry", "token")),
		Insecure:   l.boolean("registry", "insecure"),
		CAFile:     l.str("registry", "ca_file"),
		Repository: l.str("registry", "repository"),
		Listen:     l.str("registry", "listen"),
	}

	l.worker(c, val("worker"))

	mods, ok := l.section(val("modules"), "modules", []string{"modules"}, "module name to module", nil)
	l.skip.modules = !ok
	l.skip.leaf["modules"] = !ok
	l.names("modules", mods)
	for _, e := range mods {
		c.Modules[e.key.Value] = l.module(e.key.Value, e.val)
	}

	machines, ok := l.section(val("machines"), "machines", []string{"machines"}, "machine name to machine", nil)
	l.skip.machineModules = !ok
	l.skip.machineTiers = !ok
	l.skip.leaf["machines"] = !ok
	l.names("machines", machines)
	for _, e := range machines {
		c.Machines[e.key.Value] = l.machine(e.key.Value, e.val)
	}
	l.tiers(c, val("tiers"))
	l.analysis(c, val("analysis"))
	l.windows(c, val("windows"))
	return c
}

// windows reads the windows list straight from the file: viper cannot
// override one item of a list by a variable, so MESHROLL_* variables do
// not reach it.
func (l *loader) windows(c *Config, n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		l.problem("windows", "must be a list of windows ({allow|deny: CRON, duration: D, time_zone: Z, reason: R}), got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		key := fmt.Sprintf("windows[%d]", i)
		item = resolve(item)
		l.lines[key] = item.Line
		if item.Kind != yaml.MappingNode {
			l.problem(key, "must be a mapping of %s, got %s", strings.Join(windowKeys, ", "), describe(item))
			continue
		}
		var w Window
		for _, e := range entries(item) {
			k := key + "." + e.key.Value
			l.lines[k] = e.key.Line
			if !slices.Contains(windowKeys, e.key.Value) {
				l.problem(k, "unknown key; known keys: %s", strings.Join(windowKeys, ", "))
				continue
			}
			if e.val.Kind != yaml.ScalarNode {
				l.problem(k, "must be a string, got %s", describe(e.val))
				continue
			}
			switch e.key.Value {
			case "allow":
				w.Allow = e.val.Value
			case "deny":
				w.Deny = e.val.Value
			case "time_zone":
				w.TimeZone = e.val.Value
			case "reason":
				w.Reason = e.val.Value
			case "duration":
				d, err := time.ParseDuration(e.val.Value)
				if err != nil {
					l.problem(k, "is not a duration such as 8h or 62h30m: %q", e.val.Value)
					l.skip.leaf[k] = true
					continue
				}
				w.Duration = d
			}
		}
		c.Windows = append(c.Windows, w)
	}
}

// tiers reads the tiers section. A tier is written as machines' tier is (1,
// not 01), so that one tier has one key and one MESHROLL_TIERS_<N>_* name.
// A key a tier leaves out takes DefaultTierPolicy's value.
func (l *loader) tiers(c *Config, n *yaml.Node) {
	es, _ := l.section(n, "tiers", []string{"tiers"}, "tier number to tier policy", nil)
	for _, e := range es {
		name := e.key.Value
		key, parts := "tiers."+name, []string{"tiers", name}
		tier, err := strconv.Atoi(name)
		if err != nil || strconv.Itoa(tier) != name {
			l.problem(key, "is not a tier number; write it as machines' tier is written, such as 1")
			continue
		}
		if _, ok := l.section(e.val, key, parts, strings.Join(tierKeys, ", "), tierKeys); !ok {
			continue
		}
		at := func(k string) []string { return append(parts[:len(parts):len(parts)], k) }
		p := DefaultTierPolicy()
		if a, ok := l.amount(at("max_parallel")...); ok {
			p.MaxParallel = a
		}
		if a, ok := l.amount(at("max_failed")...); ok {
			p.MaxFailed = a
		}
		if l.has(at("bake")...) {
			p.Bake = l.duration(at("bake")...)
		}
		if l.has(at("analysis")...) {
			p.Analysis = l.list(at("analysis")...)
		}
		c.Tiers[tier] = p
	}
}

// worker reads the worker section.
func (l *loader) worker(c *Config, n *yaml.Node) {
	wsec, _ := l.section(n, "worker", []string{"worker"}, strings.Join(workerKeys, ", "), workerKeys)
	c.Worker.MetricsListen = l.str("worker", "metrics_listen")
	c.Worker.UIListen = l.str("worker", "ui_listen")
	c.Worker.UIToken = secret.String(l.str("worker", "ui_token"))
	c.Worker.UITokenFile = l.str("worker", "ui_token_file")
	l.section(child(wsec, "tracing"), "worker.tracing", []string{"worker", "tracing"}, strings.Join(tracingKeys, ", "), tracingKeys)
	c.Worker.Tracing = Tracing{
		OTLPEndpoint: l.str("worker", "tracing", "otlp_endpoint"),
		ServiceName:  l.str("worker", "tracing", "service_name"),
	}
	l.section(child(wsec, "versioning"), "worker.versioning", []string{"worker", "versioning"}, strings.Join(versionKeys, ", "), versionKeys)
	c.Worker.Versioning = Versioning{
		Enabled:        l.boolean("worker", "versioning", "enabled"),
		DeploymentName: l.str("worker", "versioning", "deployment_name"),
		BuildID:        l.str("worker", "versioning", "build_id"),
	}
}

// names reports module or machine names that viper, or the environment,
// could not tell apart: viper lowercases keys, and '.', '-' and '_' all
// become '_' in a variable name.
func (l *loader) names(section string, es []entry) {
	first := map[string]string{}
	for _, e := range es {
		name := e.key.Value
		id := envReplacer.Replace(strings.ToUpper(name))
		prev, ok := first[id]
		if !ok {
			first[id] = name
			continue
		}
		key := joinKey(section, name)
		if strings.EqualFold(prev, name) {
			l.problem(key, "collides with %s: viper lowercases keys, so the two would be read as one", prev)
		} else {
			l.problem(key, "collides with %s: both are overridden by the same %s_* variables; rename one", prev, envName(section, name))
		}
	}
}

func (l *loader) module(name string, n *yaml.Node) Module {
	key := "modules." + name
	parts := []string{"modules", name}
	if _, ok := l.section(n, key, parts, strings.Join(moduleKeys, ", "), moduleKeys); !ok {
		return Module{Main: DefaultMain}
	}
	at := func(k string) []string { return append(parts[:len(parts):len(parts)], k) }
	m := Module{
		Repo:         l.str(at("repo")...),
		Path:         l.str(at("path")...),
		Source:       l.str(at("source")...),
		ControlPlane: l.boolean(at("control_plane")...),
		Main:         l.str(at("main")...),
		Builder:      l.str(at("builder")...),
		Branch:       l.str(at("branch")...),
		Command:      l.list(at("command")...),
		DigestFile:   l.str(at("digest_file")...),
		Args:         l.list(at("args")...),
		Env:          l.env(at("env")),
		Health:       l.health(key+".health", at("health")),
	}
	if m.Main == "" {
		m.Main = DefaultMain
	}
	return m
}

func (l *loader) machine(name string, n *yaml.Node) Machine {
	key := "machines." + name
	parts := []string{"machines", name}
	if _, ok := l.section(n, key, parts, strings.Join(machineKeys, ", "), machineKeys); !ok {
		l.skip.machineModules = true
		l.skip.machineTiers = true
		return Machine{}
	}
	at := func(k string) []string { return append(parts[:len(parts):len(parts)], k) }
	m := Machine{
		Host:    l.str(at("host")...),
		Tier:    l.tier(at("tier")...),
		Modules: l.list(at("modules")...),
		Token:   secret.String(l.str(at("token")...)),
		CAFile:  l.str(at("ca_file")...),
	}
	if l.skip.leaf[key+".modules"] {
		l.skip.machineModules = true
	}
	if l.skip.leaf[key+".tier"] {
		l.skip.machineTiers = true
	}
	return m
}

// health reads a module's health section (key is modules.<m>.health). A key
// it leaves out, or the whole section, takes DefaultHealth's value, so that
// every module read from a file carries the times it is judged by.
func (l *loader) health(key string, parts []string) *Health {
	h := DefaultHealth()
	if _, ok := l.section(l.nodes[key], key, parts, strings.Join(healthKeys, ", "), healthKeys); !ok {
		return &h
	}
	at := func(k ...string) []string { return append(parts[:len(parts):len(parts)], k...) }
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{
		{"interval", &h.Interval},
		{"timeout", &h.Timeout},
		{"min_healthy", &h.MinHealthy},
		{"deadline", &h.Deadline},
	} {
		if l.has(at(f.key)...) {
			*f.dst = l.duration(at(f.key)...)
		}
	}
	if l.probe(key+".http", at("http"), httpKeys) {
		h.HTTP = &mesh.HTTPProbe{Port: l.port(at("http", "port")...), Path: "/"}
		if l.has(at("http", "path")...) {
			h.HTTP.Path = l.str(at("http", "path")...)
		}
	}
	if l.probe(key+".tcp", at("tcp"), tcpKeys) {
		h.TCP = &mesh.TCPProbe{Port: l.port(at("tcp", "port")...)}
	}
	if l.has(at("exec")...) {
		h.Exec = l.list(at("exec")...)
	}
	return &h
}

// probe checks the section of a probe (key is modules.<m>.health.http or
// .tcp) and says whether the module has that probe, in the file or through
// a variable for one of its keys. A probe that is not a mapping has been
// reported, and counts as absent.
func (l *loader) probe(key string, parts, known []string) bool {
	n := l.nodes[key]
	if _, ok := l.section(n, key, parts, strings.Join(known, ", "), known); !ok {
		return false
	}
	if !isNull(n) {
		return true
	}
	for _, k := range known {
		if l.has(append(parts[:len(parts):len(parts)], k)...) {
			return true
		}
	}
	return false
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// env reads a module's env mapping.
func (l *loader) env(parts []string) map[string]string {
	return l.stringMap(parts, "variable name to value", func(name string) string {
		if !envKeyRE.MatchString(name) {
			return strconv.Quote(name) + " is not an environment variable name (letters, digits and _, not starting with a digit)"
		}
		return ""
	})
}

// stringMap reads a mapping of names to strings (a module's env, a web
// provider's headers). The names come from the file, because viper
// lowercases them and they are case-sensitive; the values come from
// viper, so MESHROLL_<KEY>_<NAME> overrides one. check says what is
// wrong with a name, or "".
func (l *loader) stringMap(parts []string, what string, check func(string) string) map[string]string {
	key := strings.Join(parts, ".")
	es, ok := l.section(l.nodes[key], key, parts, what, nil)
	if !ok || len(es) == 0 {
		return nil
	}
	out := make(map[string]string, len(es))
	lower := map[string]string{}
	for _, e := range es {
		name := e.key.Value
		k := joinKey(key, name)
		if msg := check(name); msg != "" {
			l.problem(k, "%s", msg)
		}
		if prev, dup := lower[strings.ToLower(name)]; dup {
			l.problem(k, "collides with %s: viper lowercases keys, so the two would be read as one", prev)
			continue
		}
		lower[strings.ToLower(name)] = name
		out[name] = l.str(append(parts[:len(parts):len(parts)], name)...)
	}
	return out
}

// get returns the value of the key made of parts, its dotted form, and the
// overriding variable's value if one is set.
func (l *loader) get(parts ...string) (val any, key, env string, fromEnv bool) {
	key = strings.Join(parts, ".")
	name := envName(parts...)
	l.envs[key] = name
	env, fromEnv = lookupEnv(name)
	return l.v.Get(strings.Join(parts, keyDelim)), key, env, fromEnv
}

// got renders a value for a message, as written in the file where possible.
func (l *loader) got(key string, val any, env string, fromEnv bool) string {
	if fromEnv {
		return strconv.Quote(env)
	}
	if n := l.nodes[key]; n != nil {
		return describe(n)
	}
	return fmt.Sprint(val)
}

// has says whether the file or a variable gives the key made of parts, so
// that a key left out takes its default while one given is read and checked.
func (l *loader) has(parts ...string) bool {
	val, _, _, _ := l.get(parts...)
	return val != nil
}

func (l *loader) str(parts ...string) string {
	val, key, env, fromEnv := l.get(parts...)
	switch x := val.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool, int, int64, uint64, float64, time.Duration:
		if n := l.nodes[key]; n != nil && !fromEnv && n.Kind == yaml.ScalarNode {
			return n.Value
		}
		return fmt.Sprint(x)
	}
	l.bad(key, "must be a string, got %s", l.got(key, val, env, fromEnv))
	return ""
}

func (l *loader) boolean(parts ...string) bool {
	val, key, env, fromEnv := l.get(parts...)
	switch x := val.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		if b, err := strconv.ParseBool(x); err == nil {
			return b
		}
	}
	l.bad(key, "must be true or false, got %s", l.got(key, val, env, fromEnv))
	return false
}

// tier reads a machine's tier. viper would truncate 1.5 to 1 and fail on
// "two" with an opaque error, so the value is checked here. A negative tier
// is read, and Validate reports it.
func (l *loader) tier(parts ...string) int {
	if !l.has(parts...) {
		l.bad(strings.Join(parts, "."), "missing; every machine needs a tier, a non-negative integer (tier 0 is pushed first)")
		return 0
	}
	return l.integer("a non-negative integer", parts...)
}

// integer reads a whole number, described as want in a message. viper
// would truncate 1.5 to 1, so the value is checked here; its range is
// Validate's to check.
func (l *loader) integer(want string, parts ...string) int {
	val, key, env, fromEnv := l.get(parts...)
	switch x := val.(type) {
	case int:
		return x
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n
		}
	}
	l.bad(key, "must be %s, got %s", want, l.got(key, val, env, fromEnv))
	return 0
}

// duration reads a duration. A bare number is refused: viper would read 300
// as 300ns.
func (l *loader) duration(parts ...string) time.Duration {
	val, key, env, fromEnv := l.get(parts...)
	switch x := val.(type) {
	case nil:
		return 0
	case time.Duration:
		return x
	case string:
		if d, err := time.ParseDuration(strings.TrimSpace(x)); err == nil {
			return d
		}
	}
	l.bad(key, "must be a duration such as 90s or 5m, got %s", l.got(key, val, env, fromEnv))
	return 0
}

// port reads a probe's port. 0 is refused here rather than in Validate,
// because once read it means mesh.PortAuto; a port out of range is read,
// and Validate reports it.
func (l *loader) port(parts ...string) int {
	val, key, env, fromEnv := l.get(parts...)
	switch x := val.(type) {
	case nil:
		l.bad(key, "missing; give the port the container serves, %s", portRule)
		return mesh.PortAuto
	case int:
		if x != 0 {
			return x
		}
	case string:
		if x == "auto" {
			return mesh.PortAuto
		}
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil && n != 0 {
			return n
		}
	}
	l.bad(key, "must be a port %s, got %s", portRule, l.got(key, val, env, fromEnv))
	return mesh.PortAuto
}

// amount reads a tier's max_parallel or max_failed, and says whether the
// file or a variable gives it. Its range is Validate's to check.
func (l *loader) amount(parts ...string) (Amount, bool) {
	val, key, env, fromEnv := l.get(parts...)
	switch x := val.(type) {
	case nil:
		return Amount{}, false
	case int:
		return Amount{N: x}, true
	case string:
		num, percent := strings.CutSuffix(strings.TrimSpace(x), "%")
		if n, err := strconv.Atoi(num); err == nil {
			return Amount{N: n, Percent: percent}, true
		}
	}
	l.bad(key, "must be a number of machines such as 2 or a percentage of the tier such as 25%%, got %s", l.got(key, val, env, fromEnv))
	return Amount{}, true
}

// list reads a list of strings. From a variable it is split at commas and
// spaces ("host,mesh-controller").
func (l *loader) list(parts ...string) []string {
	val, key, env, fromEnv := l.get(parts...)
	switch x := val.(type) {
	case nil:
		return nil
	case string:
		if fromEnv {
			return strings.FieldsFunc(x, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
		}
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			switch e := e.(type) {
			case string:
				out = append(out, e)
			case bool, int, int64, uint64, float64:
				out = append(out, fmt.Sprint(e))
			default:
				l.bad(key, "must be a list of strings; item %d is not", i+1)
				return nil
			}
		}
		return out
	}
	l.bad(key, "must be a list, such as [a, b], got %s", l.got(key, val, env, fromEnv))
	return nil
}
