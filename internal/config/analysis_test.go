package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/expr-lang/expr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/secret"
)

// analysisMesh is the example: a prometheus and a web provider and
// two checks on tier 1, after healthMesh's machines (tiers on line 10,
// analysis from line 12).
const analysisMesh = `tiers:
  1: {max_parallel: 1, bake: 10m, analysis: [error-rate, status]}
analysis:
  providers:
    prom: {prometheus: {address: http://127.0.0.1:9090}}
    api:  {web: {url: "https://status.internal/{{.Module}}", json_path: "$.ok"}}
  checks:
    error-rate:
      provider: prom
      query: 'sum(rate(http_requests_total{code=~"5..",module="{{.Module}}",generation="{{.Generation}}"}[1m]))'
      success: 'result < 0.5'
      interval: 30s
      count: 10
      failure_limit: 1
      initial_delay: 1m
      dry_run: false
    status:
      provider: api
      success: 'result == true'
`

func parseAnalysis(t *testing.T, tail string) *Config {
	t.Helper()
	c, err := Parse("mesh.yaml", fmt.Appendf(nil, healthMesh, "{}", tail))
	require.NoError(t, err)
	return c
}

func TestAnalysisKeys(t *testing.T) {
	c := parseAnalysis(t, analysisMesh)
	assert.Equal(t, []string{"error-rate", "status"}, c.Tiers[1].Analysis)
	assert.Equal(t, map[string]Provider{
		"prom": {Prometheus: &Prometheus{Address: "http://127.0.0.1:9090"}},
		"api":  {Web: &Web{URL: "https://status.internal/{{.Module}}", JSONPath: "$.ok"}},
	}, c.Analysis.Providers)
	assert.Equal(t, map[string]Check{
		"error-rate": {
			Provider: "prom", Query: `sum(rate(http_requests_total{code=~"5..",module="{{.Module}}",generation="{{.Generation}}"}[1m]))`,
			Success: "result < 0.5", Interval: 30 * time.Second, Count: 10, FailureLimit: 1, InitialDelay: time.Minute,
		},
		"status": {Provider: "api", Success: "result == true", Interval: time.Minute, Count: 1},
	}, c.Analysis.Checks, "a key left out takes its default: interval 1m, count 1, failure_limit 0, initial_delay 0s, dry_run false")

	c = parseAnalysis(t, "")
	assert.Empty(t, c.Analysis.Providers)
	assert.Empty(t, c.Analysis.Checks)
	assert.Equal(t, Check{Interval: time.Minute, Count: 1}, DefaultCheck())
}

// Secrets come from variables, as the machines' tokens do, and print
// redacted; a header keeps its name as written and takes its value from a
// variable.
func TestAnalysisFromTheEnvironment(t *testing.T) {
	t.Setenv("MESHROLL_ANALYSIS_PROVIDERS_PROM_PROMETHEUS_BEARER_TOKEN", "t0k")
	t.Setenv("MESHROLL_ANALYSIS_PROVIDERS_API_WEB_HEADERS_X_API_KEY", "k3y")
	t.Setenv("MESHROLL_ANALYSIS_CHECKS_ERROR_RATE_COUNT", "4")
	t.Setenv("MESHROLL_ANALYSIS_CHECKS_STATUS_DRY_RUN", "true")
	c := parseAnalysis(t, strings.Replace(analysisMesh, `json_path: "$.ok"`, `json_path: "$.ok", headers: {X-Api-Key: placeholder}`, 1))
	prom := c.Analysis.Providers["prom"].Prometheus
	assert.Equal(t, secret.String("t0k"), prom.BearerToken)
	assert.Equal(t, map[string]secret.String{"X-Api-Key": "k3y"}, c.Analysis.Providers["api"].Web.Headers)
	assert.Equal(t, 4, c.Analysis.Checks["error-rate"].Count)
	assert.True(t, c.Analysis.Checks["status"].DryRun)
	shown := fmt.Sprintf("%+v %+v", *prom, *c.Analysis.Providers["api"].Web)
	assert.NotContains(t, shown, "t0k")
	assert.NotContains(t, shown, "k3y")
}

func TestAnalysisProviderAuth(t *testing.T) {
	c := parseAnalysis(t, `tiers:
  1: {analysis: [a, b]}
analysis:
  providers:
    api: {web: {url: "https://status.internal/{{join .Machines \",\"}}"}}
    basic: {prometheus: {address: "https://prom.internal", basic_auth: {username: ops, password: pw}, tls: {ca_file: ca.pem}}}
  checks:
    a: {provider: api, success: "result.ok"}
    b: {provider: basic, query: up, success: "all(result, # == 1)"}
`)
	assert.Equal(t, &Prometheus{Address: "https://prom.internal", BasicAuth: &BasicAuth{Username: "ops", Password: "pw"}, TLS: &ProviderTLS{CAFile: "ca.pem"}},
		c.Analysis.Providers["basic"].Prometheus)
	assert.Empty(t, c.Warnings())
}

func TestPrometheusToken(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(f, []byte(" t0k\n"), 0o600))
	tok, err := Prometheus{BearerTokenFile: f}.Token()
	require.NoError(t, err)
	assert.Equal(t, secret.String("t0k"), tok)
	tok, err = Prometheus{BearerToken: "x"}.Token()
	require.NoError(t, err)
	assert.Equal(t, secret.String("x"), tok)
	_, err = Prometheus{BearerTokenFile: filepath.Join(t.TempDir(), "none")}.Token()
	assert.ErrorContains(t, err, "bearer_token_file")
}

// The success expressions the issue shows compile, and judge numbers,
// vectors and JSON values as written.
func TestCheckProgram(t *testing.T) {
	for _, tc := range []struct {
		success string
		result  any
		want    bool
	}{
		{"result < 0.5", 0.3, true},
		{"result < 0.5", 0.7, false},
		{"all(result, # < 0.5)", []float64{0.1, 0.2}, true},
		{"all(result, # < 0.5)", []float64{0.1, 0.7}, false},
		{"result.ok == true", map[string]any{"ok": true}, true},
	} {
		p, err := Check{Success: tc.success}.Program()
		require.NoError(t, err, tc.success)
		out, err := expr.Run(p, SuccessEnv{Result: tc.result})
		require.NoError(t, err, tc.success)
		assert.Equal(t, tc.want, out, "%s with %v", tc.success, tc.result)
	}
}

// TestAnalysisProblems has one case per rule: each problem names its key
// and its line.
func TestAnalysisProblems(t *testing.T) {
	const tier = "tiers:\n  1: {analysis: [c]}\n" // lines 10-11
	// check is a section with one check c (line 16) on provider p (line
	// 13), formatted with p's value and c's keys.
	check := func(provider, keys string) string {
		return tier + "analysis:\n  providers:\n    p: " + provider + "\n  checks:\n    c: {" + keys + "}\n"
	}
	const prom = "{prometheus: {address: http://127.0.0.1:9090}}"
	const ok = "provider: p, query: up, success: result == 1"
	checkMeshCases(t, []meshCase{
		{name: "valid: the issue's example", tiers: analysisMesh},
		{name: "valid: one check", tiers: check(prom, ok)},
		{
			name:  "unknown provider",
			tiers: check(prom, "provider: prometheus, query: up, success: result == 1"),
			want:  []Problem{{"analysis.checks.c.provider", `unknown provider "prometheus"; providers are p (line 16)`}},
		},
		{
			name:  "check without a provider",
			tiers: check(prom, "query: up, success: result == 1"),
			want:  []Problem{{"analysis.checks.c.provider", "missing; name one of analysis.providers (p) (line 16)"}},
		},
		{
			name:  "provider with no kind",
			tiers: check("{}", ok),
			want:  []Problem{{"analysis.providers.p", "has no kind; give prometheus: {address: ...} or web: {url: ...} (line 14)"}},
		},
		{
			name:  "provider with two kinds",
			tiers: check("{prometheus: {address: http://127.0.0.1:9090}, web: {url: http://x}}", ok),
			want:  []Problem{{"analysis.providers.p", "has prometheus and web; a provider is one kind, so write two providers (line 14)"}},
		},
		{
			name:  "provider of an unknown kind",
			tiers: check("{datadog: {site: x}}", ok),
			want: []Problem{
				{"analysis.providers.p", "has no kind; give prometheus: {address: ...} or web: {url: ...} (line 14)"},
				{"analysis.providers.p.datadog", "unknown key; known keys: prometheus, web (line 14)"},
			},
		},
		{
			name:  "prometheus without an address",
			tiers: check("{prometheus: {bearer_token_file: /run/t}}", ok),
			want:  []Problem{{"analysis.providers.p.prometheus.address", "missing; give the Prometheus server's base URL, such as http://127.0.0.1:9090 (line 14)"}},
		},
		{
			name:  "prometheus address without a scheme",
			tiers: check("{prometheus: {address: 127.0.0.1:9090}}", ok),
			want:  []Problem{{"analysis.providers.p.prometheus.address", "has no scheme, such as http://; want the Prometheus server's base URL, such as http://127.0.0.1:9090 (line 14)"}},
		},
		{
			name:  "prometheus address that does not parse",
			tiers: check(`{prometheus: {address: "http://[::1"}}`, ok),
			want:  []Problem{{"analysis.providers.p.prometheus.address", "does not parse as a URL; want the Prometheus server's base URL, such as http://127.0.0.1:9090 (line 14)"}},
		},
		{
			name:  "prometheus address with credentials",
			tiers: check(`{prometheus: {address: "http://ops:pw@prom:9090"}}`, ok),
			want:  []Problem{{"analysis.providers.p.prometheus.address", `"http://ops:xxxxx@prom:9090" carries credentials; use basic_auth, a bearer token or headers instead; want the Prometheus server's base URL, such as http://127.0.0.1:9090 (line 14)`}},
		},
		{
			name:  "bearer token twice, and with basic auth",
			tiers: check("{prometheus: {address: http://127.0.0.1:9090, bearer_token: x, bearer_token_file: /run/t, basic_auth: {password: y}}}", ok),
			want: []Problem{
				{"analysis.providers.p.prometheus.basic_auth", "give either a bearer token or basic_auth, not both (line 14)"},
				{"analysis.providers.p.prometheus.basic_auth.username", "missing; basic_auth needs a username (line 14)"},
				{"analysis.providers.p.prometheus.bearer_token_file", "give the token either as bearer_token or as a file, not both (line 14)"},
			},
		},
		{
			name:  "web url that does not parse as a template",
			tiers: check(`{web: {url: "https://status/{{.Module"}}`, "provider: p, success: result"),
			want:  []Problem{{"analysis.providers.p.web.url", "is not a template over {{.Plan}}, {{.Module}}, {{.Commit}}, {{.Generation}}, {{.Tier}}, {{.Machines}}: template: analysis.providers.p.web.url:1: unclosed action (line 14)"}},
		},
		{
			name:  "web url naming an unknown field",
			tiers: check(`{web: {url: "https://status/{{.Service}}"}}`, "provider: p, success: result"),
			want:  []Problem{{"analysis.providers.p.web.url", `is not a template over {{.Plan}}, {{.Module}}, {{.Commit}}, {{.Generation}}, {{.Tier}}, {{.Machines}}: template: analysis.providers.p.web.url:1:17: executing "analysis.providers.p.web.url" at <.Service>: can't evaluate field Service in type config.AnalysisVars (line 14)`}},
		},
		{
			name:  "web url that is not http",
			tiers: check(`{web: {url: "ftp://status/{{.Module}}", json_path: ok}}`, "provider: p, success: result"),
			want: []Problem{
				{"analysis.providers.p.web.json_path", `"ok" is not a JSONPath; it starts at the answer's root, $, such as $.ok (line 14)`},
				{"analysis.providers.p.web.url", `"ftp://status/module" is not an http or https URL; want the URL to fetch, such as https://status.internal/{{.Module}} (line 14)`},
			},
		},
		{
			name:  "web header that is not a header name",
			tiers: check(`{web: {url: "https://status", headers: {"X Key": v}}}`, "provider: p, success: result"),
			want:  []Problem{{"analysis.providers.p.web.headers.X Key", `"X Key" is not an HTTP header name (letters, digits and -, such as X-Api-Key) (line 14)`}},
		},
		{
			name:  "query on a web provider",
			tiers: check(`{web: {url: "https://status"}}`, ok),
			want:  []Problem{{"analysis.checks.c.query", "a web provider's check has no query: its url is fetched; remove query or use a prometheus provider (line 16)"}},
		},
		{
			name:  "prometheus check without a query",
			tiers: check(prom, "provider: p, success: result == 1"),
			want:  []Problem{{"analysis.checks.c.query", `missing; give the PromQL query to measure, such as 'sum(rate(http_requests_total{code=~"5..",module="{{.Module}}"}[1m]))' (line 16)`}},
		},
		{
			name:  "query that does not parse",
			tiers: check(prom, `provider: p, query: "up{module=\"{{.Module}\"}", success: result == 1`),
			want:  []Problem{{"analysis.checks.c.query", `is not a template over {{.Plan}}, {{.Module}}, {{.Commit}}, {{.Generation}}, {{.Tier}}, {{.Machines}}: template: analysis.checks.c.query:1: bad character U+007D '}' (line 16)`}},
		},
		{
			name:  "query naming an unknown field",
			tiers: check(prom, `provider: p, query: "up{machine=\"{{.Machine}}\"}", success: result == 1`),
			want:  []Problem{{"analysis.checks.c.query", `is not a template over {{.Plan}}, {{.Module}}, {{.Commit}}, {{.Generation}}, {{.Tier}}, {{.Machines}}: template: analysis.checks.c.query:1:14: executing "analysis.checks.c.query" at <.Machine>: can't evaluate field Machine in type config.AnalysisVars (line 16)`}},
		},
		{
			name:  "valid: a query over the tier's machines",
			tiers: check(prom, `provider: p, query: "up{machine=~\"{{join .Machines \"|\"}}\",tier=\"{{.Tier}}\",commit=\"{{.Commit}}\",plan=\"{{.Plan}}\"}", success: result == 1`),
		},
		{
			name:  "success missing",
			tiers: check(prom, "provider: p, query: up"),
			want:  []Problem{{"analysis.checks.c.success", "missing; give an expression over result that is true for a good measurement, such as 'result < 0.5' (line 16)"}},
		},
		{
			name:  "success that does not compile",
			tiers: check(prom, `provider: p, query: up, success: "result <"`),
			want:  []Problem{{"analysis.checks.c.success", "does not compile as a boolean expression over result (a number, a vector of numbers or a JSON value): unexpected token EOF (1:8) (line 16)"}},
		},
		{
			name:  "success that is not a boolean",
			tiers: check(prom, `provider: p, query: up, success: "1 + 1"`),
			want:  []Problem{{"analysis.checks.c.success", "does not compile as a boolean expression over result (a number, a vector of numbers or a JSON value): expected bool, but got int (line 16)"}},
		},
		{
			name:  "success naming something other than result",
			tiers: check(prom, `provider: p, query: up, success: "value < 1"`),
			want:  []Problem{{"analysis.checks.c.success", "does not compile as a boolean expression over result (a number, a vector of numbers or a JSON value): unknown name value (1:1) (line 16)"}},
		},
		{
			name:  "count below 1",
			tiers: check(prom, ok+", count: 0"),
			want:  []Problem{{"analysis.checks.c.count", "must be at least 1 measurement, got 0 (line 16)"}},
		},
		{
			name:  "count not a number",
			tiers: check(prom, ok+", count: 1.5, failure_limit: 1"),
			want:  []Problem{{"analysis.checks.c.count", "must be a whole number, got 1.5 (line 16)"}},
		},
		{
			name:  "failure_limit at count",
			tiers: check(prom, ok+", count: 3, failure_limit: 3"),
			want:  []Problem{{"analysis.checks.c.failure_limit", "must be below count (3), got 3: every measurement could fail and the check still pass; lower failure_limit or raise count (line 16)"}},
		},
		{
			name:  "failure_limit above the default count",
			tiers: check(prom, ok+", failure_limit: 1"),
			want:  []Problem{{"analysis.checks.c.failure_limit", "must be below count (1), got 1: every measurement could fail and the check still pass; lower failure_limit or raise count (line 16)"}},
		},
		{
			name:  "failure_limit negative",
			tiers: check(prom, ok+", failure_limit: -1"),
			want:  []Problem{{"analysis.checks.c.failure_limit", "must be 0 or more, got -1 (line 16)"}},
		},
		{
			name:  "negative and zero durations",
			tiers: check(prom, ok+", interval: 0s, initial_delay: -1m"),
			want: []Problem{
				{"analysis.checks.c.initial_delay", "must be a duration of 0s or more, such as 1m, got -1m0s (line 16)"},
				{"analysis.checks.c.interval", "must be a positive duration, such as 30s or 1m, got 0s (line 16)"},
			},
		},
		{
			name:  "negative interval",
			tiers: check(prom, ok+", interval: -30s"),
			want:  []Problem{{"analysis.checks.c.interval", "must be a positive duration, such as 30s or 1m, got -30s (line 16)"}},
		},
		{
			name:  "interval that does not parse",
			tiers: check(prom, ok+", interval: 30"),
			want:  []Problem{{"analysis.checks.c.interval", "must be a duration such as 90s or 5m, got 30 (line 16)"}},
		},
		{
			name:  "tier naming an unknown check",
			tiers: "tiers:\n  1: {analysis: [c, error-rates, c]}\nanalysis:\n  providers:\n    p: " + prom + "\n  checks:\n    c: {" + ok + "}\n",
			want: []Problem{
				{"tiers.1.analysis", `lists "c" twice (line 11)`},
				{"tiers.1.analysis", `unknown check "error-rates"; checks are c (under analysis.checks) (line 11)`},
			},
		},
		{
			name:  "a check no tier lists",
			tiers: check(prom, ok) + "    d: {" + ok + "}\n",
			want:  []Problem{{"analysis.checks.d", "no tier lists it under tiers.<n>.analysis, so it never runs; attach it to a tier (with dry_run: true to only watch), or remove it (line 17)"}},
		},
		{
			name:  "tier naming a check with no analysis section",
			tiers: "tiers:\n  1: {analysis: [c]}\n",
			want:  []Problem{{"tiers.1.analysis", `unknown check "c"; checks are none (under analysis.checks) (line 11)`}},
		},
		{
			name:  "tier naming checks from the environment",
			tiers: check(prom, ok),
			env:   map[string]string{"MESHROLL_TIERS_1_ANALYSIS": "c,d"},
			want:  []Problem{{"tiers.1.analysis", `unknown check "d"; checks are c (under analysis.checks) (from MESHROLL_TIERS_1_ANALYSIS)`}},
		},
		{
			name:  "sections of the wrong shape",
			tiers: tier + "analysis:\n  providers: [p]\n  checks:\n    c: {provider: p, sucess: x}\n  metrics: {}\n",
			want: []Problem{
				{"analysis.checks.c.success", "missing; give an expression over result that is true for a good measurement, such as 'result < 0.5' (line 15)"},
				{"analysis.checks.c.sucess", "unknown key; known keys: provider, query, success, interval, count, failure_limit, initial_delay, dry_run (line 15)"},
				{"analysis.metrics", "unknown key; known keys: providers, checks (line 16)"},
				{"analysis.providers", `must be a mapping of provider name to provider, got a list (line 13)`},
			},
		},
		{
			name:  "a provider's kind of the wrong shape",
			tiers: check("{prometheus: http://127.0.0.1:9090}", ok),
			want:  []Problem{{"analysis.providers.p.prometheus", `must be a mapping of address, bearer_token, bearer_token_file, basic_auth, tls, got "http://127.0.0.1:9090" (line 14)`}},
		},
		{
			name:  "names that are not names",
			tiers: "tiers:\n  1: {analysis: [\"Error Rate\"]}\nanalysis:\n  providers:\n    Prom/1: " + prom + "\n  checks:\n    Error Rate: {provider: Prom/1, query: up, success: result == 1}\n",
			want: []Problem{
				{"analysis.checks.Error Rate", `check name "Error Rate" must be 1-64 of [a-z0-9._-], starting and ending with a letter or digit (line 16)`},
				{"analysis.providers.Prom/1", `provider name "Prom/1" must be 1-64 of [a-z0-9._-], starting and ending with a letter or digit (line 14)`},
			},
		},
		{
			name:  "a check of the wrong shape",
			tiers: tier + "analysis:\n  checks:\n    c: error-rate\n",
			want:  []Problem{{"analysis.checks.c", `must be a mapping of provider, query, success, interval, count, failure_limit, initial_delay, dry_run, got "error-rate" (line 14)`}},
		},
	})
}

func TestAnalysisWarnings(t *testing.T) {
	c := parseAnalysis(t, analysisMesh)
	assert.Empty(t, c.Warnings(), "the issue's example has nothing to warn of")

	c = Default()
	c.Analysis.Providers["prom"] = Provider{Prometheus: &Prometheus{Address: "http://10.0.0.9:9090", BearerToken: "t0k", TLS: &ProviderTLS{InsecureSkipVerify: true}}}
	c.Analysis.Providers["idle"] = Provider{Web: &Web{URL: "https://x"}}
	c.Analysis.Checks["c"] = Check{Provider: "prom"}
	c.Tiers[1] = TierPolicy{Analysis: []string{"c"}}
	assert.Equal(t, []string{
		"analysis provider idle: no check uses it; name it in a check's provider or remove it",
		"analysis provider prom: insecure_skip_verify accepts any certificate, so anyone in the path can answer for Prometheus and pass a bad build; give tls.ca_file instead",
		"analysis provider prom: its credentials are sent in clear to 10.0.0.9:9090; use https",
	}, c.Warnings())
}

func TestAnalysisBuiltInCode(t *testing.T) {
	c := Default()
	c.Modules["host"] = Module{Repo: "."}
	c.Machines["edge-1"] = Machine{Host: "http://127.0.0.1:7401", Tier: 1, Modules: []string{"host"}}
	c.Analysis.Providers["prom"] = Provider{Prometheus: &Prometheus{Address: "http://127.0.0.1:9090"}}
	c.Analysis.Checks["c"] = Check{Provider: "prom", Query: "up", Success: "result == 1"}
	c.Tiers[1] = TierPolicy{MaxParallel: Amount{N: 1}, Analysis: []string{"c"}}
	assert.EqualError(t, c.Validate(), "mesh config: 2 problems:\n"+
		"  analysis.checks.c.count: must be at least 1 measurement, got 0\n"+
		"  analysis.checks.c.interval: must be a positive duration, such as 30s or 1m, got 0s")

	ch := DefaultCheck()
	ch.Provider, ch.Query, ch.Success = "prom", "up", "result == 1"
	c.Analysis.Checks["c"] = ch
	assert.NoError(t, c.Validate())
}
