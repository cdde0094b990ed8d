package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/secret"
)

// Defaults of an analysis check, for the keys a check leaves out: one
// measurement, taken at once, no failure tolerated, and a failure halts
// (failure_limit 0, initial_delay 0s and dry_run false are zero values).
const (
	// DefaultAnalysisInterval is the time between measurements: a minute
	// is the usual rate window ([1m]) over a 15s-30s scrape, so two
	// measurements do not read the same samples.
	DefaultAnalysisInterval = time.Minute
	// DefaultAnalysisCount is one measurement: a check that says nothing
	// more is a single look once the tier is healthy.
	DefaultAnalysisCount = 1
)

// Analysis is the analysis section: where metrics are read (providers) and
// what they must say (checks) for a tier naming the checks to go on. A
// health probe sees one container; a check sees what the build does to the
// fleet (its callers' error rate, its memory over a bake), which is what
// catches a build that runs, answers its probe and is still bad.
type Analysis struct {
	// Providers are where measurements come from, by name.
	Providers map[string]Provider `mapstructure:"providers"`
	// Checks are the measurements and their success conditions, by name;
	// a tier lists the ones it waits on under tiers.<n>.analysis.
	Checks map[string]Check `mapstructure:"checks"`
}

// Provider is one source of measurements: a Prometheus server or a web
// endpoint answering JSON. Exactly one of the two is set.
type Provider struct {
	// Prometheus is a server answering PromQL.
	Prometheus *Prometheus `mapstructure:"prometheus"`
	// Web is an endpoint answering JSON.
	Web *Web `mapstructure:"web"`
}

// Kind names the provider's kind ("prometheus" or "web"), "" when it has
// none.
func (p Provider) Kind() string {
	switch {
	case p.Prometheus != nil:
		return "prometheus"
	case p.Web != nil:
		return "web"
	}
	return ""
}

// Prometheus is a Prometheus server (or anything answering its HTTP query
// API, such as Thanos or Mimir) and how to authenticate to it.
type Prometheus struct {
	// Address is the server's base URL, such as http://127.0.0.1:9090.
	Address string `mapstructure:"address"`
	// BearerToken is sent as Authorization: Bearer. Put it in
	// MESHROLL_ANALYSIS_PROVIDERS_<P>_PROMETHEUS_BEARER_TOKEN, not the
	// file; it is never logged.
	BearerToken secret.String `mapstructure:"bearer_token"`
	// BearerTokenFile holds BearerToken instead, read at each start.
	BearerTokenFile string `mapstructure:"bearer_token_file"`
	// BasicAuth is a username and password instead of a token.
	BasicAuth *BasicAuth `mapstructure:"basic_auth"`
	// TLS is how the server's certificate is checked.
	TLS *ProviderTLS `mapstructure:"tls"`
}

// Token is the bearer token: BearerToken, or BearerTokenFile's contents
// read now (so that a rotated file is read at the next start); "" when
// neither is set.
func (p Prometheus) Token() (secret.String, error) {
	return tokenOrFile(p.BearerToken, p.BearerTokenFile, "bearer_token_file")
}

// BasicAuth is HTTP basic authentication.
type BasicAuth struct {
	// Username is required with basic_auth.
	Username string `mapstructure:"username"`
	// Password is never logged; put it in a MESHROLL_* variable.
	Password secret.String `mapstructure:"password"`
}

// ProviderTLS is how a provider's certificate is checked, for a server
// whose certificate a private CA issued (or, knowingly, none).
type ProviderTLS struct {
	// CAFile is a PEM bundle of the CAs to trust (empty: the system's).
	CAFile string `mapstructure:"ca_file"`
	// InsecureSkipVerify accepts any certificate. A lab's last resort:
	// Warnings reports it.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// Web is an HTTP endpoint answering JSON, for a status page or a metrics
// service that is not Prometheus. The check's success expression sees the
// value at JSONPath.
type Web struct {
	// URL is a text/template over AnalysisVars, such as
	// https://status.internal/{{.Module}}.
	URL string `mapstructure:"url"`
	// JSONPath picks the result out of the answer, such as $.ok; empty or
	// $ is the whole answer.
	JSONPath string `mapstructure:"json_path"`
	// Headers are sent with each request. Their values are secrets (an
	// Authorization header is the usual one), so they are never logged.
	Headers map[string]secret.String `mapstructure:"headers"`
}

// Check is one analysis: a query measured every Interval, Count times,
// judged by Success; more than FailureLimit failed measurements fail it.
type Check struct {
	// Provider names the provider under analysis.providers.
	Provider string `mapstructure:"provider"`
	// Query is the PromQL query of a prometheus provider, a text/template
	// over AnalysisVars. A web provider's check has none: its URL is the
	// query.
	Query string `mapstructure:"query"`
	// Success is an expr expression over result (a number, a vector of
	// numbers, or a JSON value) that is true for a good measurement, such
	// as "result < 0.5" or "all(result, # < 0.5)". Compile it with
	// Program.
	Success string `mapstructure:"success"`
	// Interval is the time between measurements (default 1m).
	Interval time.Duration `mapstructure:"interval"`
	// Count is how many measurements are taken before the check passes
	// (default 1).
	Count int `mapstructure:"count"`
	// FailureLimit is how many failed measurements are tolerated, below
	// Count (default 0).
	FailureLimit int `mapstructure:"failure_limit"`
	// InitialDelay is the wait before the first measurement, for the new
	// build's metrics to fill a rate window (default 0s).
	InitialDelay time.Duration `mapstructure:"initial_delay"`
	// DryRun measures and reports, and never halts the plan: how a new
	// check is tried on a fleet before it is trusted.
	DryRun bool `mapstructure:"dry_run"`
}

// DefaultCheck is what a check's keys left out take.
func DefaultCheck() Check {
	return Check{Interval: DefaultAnalysisInterval, Count: DefaultAnalysisCount}
}

// Program compiles Success, as every check's is compiled at validation,
// for the analysis to run with Run(program, SuccessEnv{Result: value}).
func (c Check) Program() (*vm.Program, error) {
	return CompileSuccess(c.Success)
}

// SuccessEnv is what a success expression sees: result is the measurement
// (a float64, a []float64 of a vector's samples, or a decoded JSON value).
type SuccessEnv struct {
	Result any `expr:"result"`
}

// CompileSuccess compiles a success expression against SuccessEnv. It
// must be a boolean; result's type is only known when it is measured, so
// "result < 0.5" and "all(result, # < 0.5)" both compile.
func CompileSuccess(success string) (*vm.Program, error) {
	return expr.Compile(success, expr.Env(SuccessEnv{}), expr.AsBool())
}

// AnalysisVars is what a query or URL template sees: the plan and build
// under analysis and the tier's machines that took it. Load executes
// every template on a sample of it, so a template naming any other field
// is refused there rather than during a bake.
type AnalysisVars struct {
	// Plan is the plan's workflow ID.
	Plan string
	// Module is the module the plan pushes.
	Module string
	// Commit is the build's commit, in full.
	Commit string
	// Generation is the build's generation on its branch, the label a
	// module's metrics tell builds apart by.
	Generation int64
	// Tier is the tier under analysis.
	Tier int
	// Machines are the tier's machines that took the build, sorted.
	Machines []string
}

// sampleAnalysisVars is what templates are executed with at validation: every
// field non-zero, so that {{index .Machines 0}} passes where it would at
// run time.
var sampleAnalysisVars = AnalysisVars{Plan: "plan", Module: "module", Commit: "0123456789abcdef", Generation: 1, Tier: 1, Machines: []string{"machine"}}

// analysisFuncs are the functions a template may call besides text/template's
// own: join, for a regex over the tier's machines
// (machine=~"{{join .Machines "|"}}").
var analysisFuncs = template.FuncMap{"join": func(s []string, sep string) string { return strings.Join(s, sep) }}

// AnalysisTemplate parses a query or URL template as the analysis runs
// it: with join, and failing on a missing key rather than printing
// "<no value>" into a query.
func AnalysisTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(analysisFuncs).Option("missingkey=error").Parse(text)
}

// checkTemplate parses text and executes it on the sample, returning the
// sample's rendering or the first line of what is wrong.
func checkTemplate(name, text string) (string, string) {
	t, err := AnalysisTemplate(name, text)
	if err == nil {
		var b strings.Builder
		if err = t.Execute(&b, sampleAnalysisVars); err == nil {
			return b.String(), ""
		}
	}
	return "", firstLine(err)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// analysisProblems checks the analysis section and the checks tiers name:
// each provider has one kind and what that kind needs, each check names a
// provider and compiles, and its counts can pass.
func (c *Config) analysisProblems(ps *problemList) {
	a := c.Analysis
	provUnread := ps.skip != nil && (ps.skip.tree["analysis"] || ps.skip.tree["analysis.providers"])
	for _, name := range sortedKeys(a.Providers) {
		key := "analysis.providers." + name
		if ps.named("provider", key, name) {
			providerProblems(ps, key, a.Providers[name])
		}
	}
	for _, name := range sortedKeys(a.Checks) {
		key := "analysis.checks." + name
		if !ps.named("check", key, name) {
			continue
		}
		ch := a.Checks[name]
		p, ok := a.Providers[ch.Provider]
		if p.Prometheus != nil && p.Web != nil {
			p = Provider{} // reported: which kind it is cannot be told
		}
		switch {
		case strings.TrimSpace(ch.Provider) == "":
			ps.add(key+".provider", "missing; name one of analysis.providers (%s)", orNone(sortedKeys(a.Providers)))
		case !ok && !provUnread:
			ps.add(key+".provider", "unknown provider %q; providers are %s", ch.Provider, orNone(sortedKeys(a.Providers)))
		}
		switch {
		case p.Web != nil && ch.Query != "":
			ps.add(key+".query", "a web provider's check has no query: its url is fetched; remove query or use a prometheus provider")
		case p.Prometheus != nil && strings.TrimSpace(ch.Query) == "":
			ps.add(key+".query", "missing; give the PromQL query to measure, such as 'sum(rate(http_requests_total{code=~\"5..\",module=\"{{.Module}}\"}[1m]))'")
		}
		if ch.Query != "" {
			if _, msg := checkTemplate(key+".query", ch.Query); msg != "" {
				ps.add(key+".query", "is not a template over %s: %s", analysisFields, msg)
			}
		}
		if strings.TrimSpace(ch.Success) == "" {
			ps.add(key+".success", "missing; give an expression over result that is true for a good measurement, such as 'result < 0.5'")
		} else if _, err := ch.Program(); err != nil {
			ps.add(key+".success", "does not compile as a boolean expression over result (a number, a vector of numbers or a JSON value): %s", firstLine(err))
		}
		if ch.Interval <= 0 {
			ps.add(key+".interval", "must be a positive duration, such as 30s or 1m, got %s", ch.Interval)
		}
		if ch.InitialDelay < 0 {
			ps.add(key+".initial_delay", "must be a duration of 0s or more, such as 1m, got %s", ch.InitialDelay)
		}
		switch {
		case ch.Count < 1:
			ps.add(key+".count", "must be at least 1 measurement, got %d", ch.Count)
		case ch.FailureLimit < 0:
			ps.add(key+".failure_limit", "must be 0 or more, got %d", ch.FailureLimit)
		case ch.FailureLimit >= ch.Count && !ps.skip.has(key+".count"):
			ps.add(key+".failure_limit", "must be below count (%d), got %d: every measurement could fail and the check still pass; lower failure_limit or raise count", ch.Count, ch.FailureLimit)
		}
	}
	checksUnread := ps.skip != nil && (ps.skip.tree["analysis"] || ps.skip.tree["analysis.checks"])
	used := map[string]bool{}
	for _, t := range sortedKeys(c.Tiers) {
		key := "tiers." + strconv.Itoa(t) + ".analysis"
		seen := map[string]bool{}
		for _, name := range c.Tiers[t].Analysis {
			used[name] = true
			if seen[name] {
				ps.add(key, "lists %q twice", name)
				continue
			}
			seen[name] = true
			if _, ok := a.Checks[name]; !ok && !checksUnread {
				ps.add(key, "unknown check %q; checks are %s (under analysis.checks)", name, orNone(sortedKeys(a.Checks)))
			}
		}
	}
	// A check no tier lists never runs: most often a tier's list has a
	// typo or lost the check in an edit, and the person who wrote the
	// check believes it guards the fleet.
	if tiersUnread := ps.skip != nil && ps.skip.tree["tiers"]; !tiersUnread {
		for _, name := range sortedKeys(a.Checks) {
			if !used[name] {
				ps.add("analysis.checks."+name, "no tier lists it under tiers.<n>.analysis, so it never runs; "+
					"attach it to a tier (with dry_run: true to only watch), or remove it")
			}
		}
	}
}

// named checks the name of a provider or check (key is its key) and says
// whether its contents were read, to be checked. A check's name goes where
// a machine's does: into activity IDs, metric labels and
// MESHROLL_TIERS_<N>_ANALYSIS, split at commas.
func (ps *problemList) named(kind, key, name string) bool {
	if err := mesh.ValidName(kind, name); err != nil {
		ps.add(key, "%v", err)
	}
	return ps.skip == nil || !ps.skip.tree[key]
}

// analysisFields lists AnalysisVars' fields for a message.
const analysisFields = "{{.Plan}}, {{.Module}}, {{.Commit}}, {{.Generation}}, {{.Tier}}, {{.Machines}}"

// providerProblems checks one provider (key is analysis.providers.<p>).
func providerProblems(ps *problemList, key string, p Provider) {
	switch {
	case ps.skip != nil && (ps.skip.tree[key+".prometheus"] || ps.skip.tree[key+".web"]):
		return // its kind could not be read, which is reported
	case p.Prometheus == nil && p.Web == nil:
		ps.add(key, "has no kind; give prometheus: {address: ...} or web: {url: ...}")
		return
	case p.Prometheus != nil && p.Web != nil:
		ps.add(key, "has prometheus and web; a provider is one kind, so write two providers")
		return
	}
	if w := p.Web; w != nil {
		if strings.TrimSpace(w.URL) == "" {
			ps.add(key+".web.url", "missing; give the URL to fetch, a template such as https://status.internal/{{.Module}}")
		} else if out, msg := checkTemplate(key+".web.url", w.URL); msg != "" {
			ps.add(key+".web.url", "is not a template over %s: %s", analysisFields, msg)
		} else if m := checkHTTPURL(out); m != "" {
			ps.add(key+".web.url", "%s; want the URL to fetch, such as https://status.internal/{{.Module}}", m)
		}
		if w.JSONPath != "" && !strings.HasPrefix(w.JSONPath, "$") {
			ps.add(key+".web.json_path", "%q is not a JSONPath; it starts at the answer's root, $, such as $.ok", w.JSONPath)
		}
		return
	}
	pr := p.Prometheus
	k := key + ".prometheus"
	if strings.TrimSpace(pr.Address) == "" {
		ps.add(k+".address", "missing; give the Prometheus server's base URL, such as http://127.0.0.1:9090")
	} else if m := checkHTTPURL(pr.Address); m != "" {
		ps.add(k+".address", "%s; want the Prometheus server's base URL, such as http://127.0.0.1:9090", m)
	}
	ps.secretOnce(k+".bearer_token", "bearer_token", "the token", pr.BearerToken, pr.BearerTokenFile)
	if b := pr.BasicAuth; b != nil {
		if pr.BearerToken != "" || pr.BearerTokenFile != "" {
			ps.add(k+".basic_auth", "give either a bearer token or basic_auth, not both")
		}
		if strings.TrimSpace(b.Username) == "" {
			ps.add(k+".basic_auth.username", "missing; basic_auth needs a username")
		}
	}
}

// checkHTTPURL returns what is wrong with an http(s) URL, or "". Neither
// the URL nor url's error (which quotes it) is shown whole when it carries
// credentials.
func checkHTTPURL(s string) string {
	if !strings.Contains(s, "://") {
		return "has no scheme, such as http://"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "does not parse as a URL"
	}
	shown := u.Redacted()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q is not an http or https URL", shown)
	case u.Hostname() == "":
		return fmt.Sprintf("%q has no host", shown)
	case u.User != nil:
		return fmt.Sprintf("%q carries credentials; use basic_auth, a bearer token or headers instead", shown)
	}
	return ""
}

// analysisWarnings is what Warnings says about the analysis section: a
// check no tier runs, a provider no check uses, a credential sent in clear
// beyond loopback, and a certificate not checked.
func (c *Config) analysisWarnings() []string {
	var out []string
	provUsed := map[string]bool{}
	for _, name := range sortedKeys(c.Analysis.Checks) {
		provUsed[c.Analysis.Checks[name].Provider] = true
	}
	for _, name := range sortedKeys(c.Analysis.Providers) {
		p := c.Analysis.Providers[name]
		if !provUsed[name] {
			out = append(out, fmt.Sprintf("analysis provider %s: no check uses it; name it in a check's provider or remove it", name))
		}
		pr := p.Prometheus
		if pr == nil {
			continue
		}
		if pr.TLS != nil && pr.TLS.InsecureSkipVerify {
			out = append(out, fmt.Sprintf("analysis provider %s: insecure_skip_verify accepts any certificate, so anyone in the path can answer for Prometheus and pass a bad build; give tls.ca_file instead", name))
		}
		u, err := url.Parse(pr.Address)
		creds := pr.BearerToken != "" || pr.BearerTokenFile != "" || pr.BasicAuth != nil
		if err == nil && u.Scheme == "http" && !Loopback(u.Hostname()) && creds {
			out = append(out, fmt.Sprintf("analysis provider %s: its credentials are sent in clear to %s; use https", name, u.Host))
		}
	}
	return out
}
