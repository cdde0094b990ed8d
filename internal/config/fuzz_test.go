package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshroll/meshroll/internal/mesh"
)

// FuzzParse feeds the config loader arbitrary bytes. Whatever the input, it
// either returns a config that validates or an error (a *ValidationError
// naming keys, or a parse error); it never panics and never returns a
// config together with an error. A config it returns gives every module a
// health check the host agent can run and every tier a rollout that pushes
// at least one machine at a time and halts when all of them fail.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"temporal: {address: 127.0.0.1:7233}\nmodules:\n  host: {repo: ., path: examples/host}\nmachines:\n  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}\n",
		"modules:\n  host: {repo: .}\n  host: {repo: .}\n",
		"machines:\n  e: {tier: -1, host: '::', modules: [nope]}\n",
		"machines:\n  ../etc: {tier: 1e9, modules: [a/b]}\n",
		"a: &x [*x]\n",
		"push: {retry_budget: 300}\n",
		"modules:\n  host:\n    repo: .\n    health: {http: {port: 8080, path: /healthz}, interval: 1s, timeout: 1s, min_healthy: 10s, deadline: 5m}\n" +
			"machines:\n  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}\n  edge-2: {host: http://127.0.0.1:7402, tier: 2, modules: [host]}\n" +
			"tiers:\n  1: {max_parallel: 1, max_failed: 0, bake: 5m}\n  2: {max_parallel: \"25%\", max_failed: \"10%\", bake: 0s}\n",
		"modules:\n  host: {repo: ., health: {tcp: {port: auto}, min_healthy: 0s}}\n  m: {repo: ., health: {exec: [/bin/sh, -c, 'test -e /ok']}}\n" +
			"machines:\n  a: {host: http://h:1, tier: 0, modules: [host, m]}\n  b: {host: http://h:2, tier: 0, modules: [host]}\ntiers: {0: {max_parallel: 50%, max_failed: 1}}\n",
		"modules: {h: {repo: ., health: {http: {port: 0, path: x}, tcp: {port: 70000}, exec: [], interval: -1s, min_healthy: 9m}}}\n" +
			"machines: {a: {host: http://h:1, tier: 1, modules: [h]}}\ntiers: {01: {max_parallel: 101%, max_failed: 100%}, 3: {bake: -1s}, x: 1}\n",
		"windows:\n  - {deny: \"0 18 * * FRI\", duration: 62h, time_zone: Europe/Berlin, reason: weekend}\n  - {allow: \"0 9 * * MON-FRI\", duration: 8h}\n",
		"windows: [{deny: TZ=x, duration: -1h, time_zone: ../etc}, {allow: \"@every 1s\"}, 3, {deny: [a]}]\n",
		"modules: {host: {repo: .}}\nmachines: {a: {host: http://h:1, tier: 1, modules: [host]}}\ntiers: {1: {analysis: [err, st]}}\n" +
			"analysis:\n  providers:\n    prom: {prometheus: {address: http://127.0.0.1:9090, basic_auth: {username: u, password: p}, tls: {ca_file: ca.pem}}}\n" +
			"    api: {web: {url: \"https://status/{{.Module}}/{{join .Machines \\\",\\\"}}\", json_path: $.ok, headers: {X-Key: v}}}\n" +
			"  checks:\n    err: {provider: prom, query: 'sum(rate(x{g=\"{{.Generation}}\"}[1m]))', success: 'all(result, # < 0.5)', interval: 30s, count: 10, failure_limit: 1, initial_delay: 1m}\n" +
			"    st: {provider: api, success: result.ok == true, dry_run: true}\n",
		"analysis: {providers: {p: {}, q: {prometheus: {}, web: {}}}, checks: {c: {provider: x, query: '{{.Nope}}', success: '1 +', count: 0, failure_limit: 2, interval: -1s}}}\ntiers: {1: {analysis: [d, d]}}\n",
		"{",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a config with error %v", err)
			}
			var ve *ValidationError
			if errors.As(err, &ve) && len(ve.Problems) == 0 {
				t.Fatalf("validation error without problems: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that does not validate: %v", err)
		}
		for name, m := range c.Modules {
			checkHealth(t, name, m.HealthCheck())
		}
		size := map[int]int{}
		for _, m := range c.Machines {
			size[m.Tier]++
		}
		for tier := range c.Tiers {
			if size[tier] == 0 {
				t.Fatalf("tier %d has a policy but no machine", tier)
			}
		}
		// Every check of an accepted config compiles, and can pass.
		for name, ch := range c.Analysis.Checks {
			if _, err := ch.Program(); err != nil || ch.Count < 1 || ch.FailureLimit < 0 || ch.FailureLimit >= ch.Count || ch.Interval <= 0 {
				t.Fatalf("check %s: %+v (%v)", name, ch, err)
			}
		}
		// Every window of an accepted config is one the hold check judges.
		if ws := c.DeployWindows(); len(ws) != len(c.Windows) {
			t.Fatalf("DeployWindows kept %d of %d windows", len(ws), len(c.Windows))
		}
		for tier, n := range size {
			for k := range n + 1 {
				r := c.Rollout(tier, k)
				if r.MaxParallel < 1 || r.MaxParallel > max(k, 1) || r.MaxFailed < 0 || r.MaxFailed > max(k-1, 0) || r.Bake < 0 {
					t.Fatalf("Rollout(%d, %d) = %+v", tier, k, r)
				}
			}
		}
	})
}

// checkHealth fails t unless h is a health check the host agent can run.
func checkHealth(t *testing.T, module string, h mesh.Health) {
	t.Helper()
	probes := 0
	port := func(p int) {
		probes++
		if p < 0 || p > 65535 {
			t.Fatalf("module %s: probe port %d", module, p)
		}
	}
	if h.HTTP != nil {
		port(h.HTTP.Port)
		if !strings.HasPrefix(h.HTTP.Path, "/") {
			t.Fatalf("module %s: http path %q", module, h.HTTP.Path)
		}
	}
	if h.TCP != nil {
		port(h.TCP.Port)
	}
	if h.Exec != nil {
		probes++
		if len(h.Exec) == 0 || h.Exec[0] == "" {
			t.Fatalf("module %s: exec %q", module, h.Exec)
		}
	}
	if probes > 1 || h.IntervalMS < 1 || h.TimeoutMS < 1 || h.DeadlineMS < 1 || h.MinHealthyMS < 0 || h.MinHealthyMS > h.DeadlineMS {
		t.Fatalf("module %s: health %+v", module, h)
	}
}
