package config

import (
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/meshroll/meshroll/internal/secret"
)

// analysis reads the analysis section. A check's keys left out take
// DefaultCheck's values.
func (l *loader) analysis(c *Config, n *yaml.Node) {
	es, _ := l.section(n, "analysis", []string{"analysis"}, strings.Join(analysisKeys, ", "), analysisKeys)
	provs, _ := l.section(child(es, "providers"), "analysis.providers", []string{"analysis", "providers"}, "provider name to provider", nil)
	l.names("analysis.providers", provs)
	for _, e := range provs {
		c.Analysis.Providers[e.key.Value] = l.provider(e.key.Value)
	}
	checks, _ := l.section(child(es, "checks"), "analysis.checks", []string{"analysis", "checks"}, "check name to check", nil)
	l.names("analysis.checks", checks)
	for _, e := range checks {
		c.Analysis.Checks[e.key.Value] = l.check(e.key.Value)
	}
}

// child is the value of key among a section's entries, nil when absent.
func child(es []entry, key string) *yaml.Node {
	for _, e := range es {
		if e.key.Value == key {
			return e.val
		}
	}
	return nil
}

func (l *loader) provider(name string) Provider {
	key, parts := "analysis.providers."+name, []string{"analysis", "providers", name}
	var p Provider
	if _, ok := l.section(l.nodes[key], key, parts, strings.Join(providerKeys, ", "), providerKeys); !ok {
		return p
	}
	at := func(k ...string) []string { return append(parts[:len(parts):len(parts)], k...) }
	if l.probe(key+".prometheus", at("prometheus"), promKeys) {
		pr := &Prometheus{
			Address:         l.str(at("prometheus", "address")...),
			BearerToken:     secret.String(l.str(at("prometheus", "bearer_token")...)),
			BearerTokenFile: l.str(at("prometheus", "bearer_token_file")...),
		}
		if l.probe(key+".prometheus.basic_auth", at("prometheus", "basic_auth"), basicAuthKeys) {
			pr.BasicAuth = &BasicAuth{
				Username: l.str(at("prometheus", "basic_auth", "username")...),
				Password: secret.String(l.str(at("prometheus", "basic_auth", "password")...)),
			}
		}
		if l.probe(key+".prometheus.tls", at("prometheus", "tls"), provTLSKeys) {
			pr.TLS = &ProviderTLS{
				CAFile:             l.str(at("prometheus", "tls", "ca_file")...),
				InsecureSkipVerify: l.boolean(at("prometheus", "tls", "insecure_skip_verify")...),
			}
		}
		p.Prometheus = pr
	}
	if l.probe(key+".web", at("web"), webKeys) {
		w := &Web{URL: l.str(at("web", "url")...), JSONPath: l.str(at("web", "json_path")...)}
		hs := l.stringMap(at("web", "headers"), "header name to value", func(h string) string {
			if !headerRE.MatchString(h) {
				return strconv.Quote(h) + " is not an HTTP header name (letters, digits and -, such as X-Api-Key)"
			}
			return ""
		})
		if len(hs) > 0 {
			w.Headers = make(map[string]secret.String, len(hs))
			for h, v := range hs {
				w.Headers[h] = secret.String(v)
			}
		}
		p.Web = w
	}
	return p
}

// headerRE is an HTTP header name: a token of RFC 9110.
var headerRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (l *loader) check(name string) Check {
	key, parts := "analysis.checks."+name, []string{"analysis", "checks", name}
	ch := DefaultCheck()
	if _, ok := l.section(l.nodes[key], key, parts, strings.Join(checkKeys, ", "), checkKeys); !ok {
		return ch
	}
	at := func(k string) []string { return append(parts[:len(parts):len(parts)], k) }
	ch.Provider = l.str(at("provider")...)
	ch.Query = l.str(at("query")...)
	ch.Success = l.str(at("success")...)
	ch.DryRun = l.boolean(at("dry_run")...)
	if l.has(at("interval")...) {
		ch.Interval = l.duration(at("interval")...)
	}
	if l.has(at("initial_delay")...) {
		ch.InitialDelay = l.duration(at("initial_delay")...)
	}
	if l.has(at("count")...) {
		ch.Count = l.integer("a whole number", at("count")...)
	}
	if l.has(at("failure_limit")...) {
		ch.FailureLimit = l.integer("a whole number", at("failure_limit")...)
	}
	return ch
}
