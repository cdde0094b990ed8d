package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Warnings lists what is allowed but unsafe in a valid config, for the
// worker to log at start: a host token sent in clear over plain http to a
// host that is not on loopback, and a host reached over the network with no
// token at all (anyone who can reach the agent could then declare what it
// runs), the fleet page served beyond loopback (plain http: its token
// travels in clear), and a module's or machine's env variable whose name says it is a secret:
// env travels in plan and machine workflow histories, which anyone who can
// read the namespace (the Web UI) sees; and in the analysis section, a check
// no tier runs, a provider no check uses, a provider's credentials in clear
// or its certificate unchecked (analysisWarnings). They are warnings, not errors, because a lab network or a tunnel
// may make them fine; the operator should decide that knowingly.
func (c *Config) Warnings() []string {
	var out []string
	names := make([]string, 0, len(c.Machines))
	for name := range c.Machines {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := c.Machines[name]
		u, err := url.Parse(m.Host)
		if err != nil || u.Scheme != "http" || Loopback(u.Hostname()) {
			continue
		}
		if m.Token != "" {
			out = append(out, fmt.Sprintf("machine %s: its host token is sent in clear to %s; serve the host API over https (host --tls-cert, machines.%s.ca_file)", name, u.Host, name))
		} else {
			out = append(out, fmt.Sprintf("machine %s: no token for %s, so anyone who can reach it can declare what it runs; set %s and start the host with --token-file", name, u.Host, envName("machines", name, "token")))
		}
	}
	if l := c.Worker.UIListen; l != "" {
		if host, _, err := net.SplitHostPort(l); err == nil && !Loopback(host) {
			out = append(out, fmt.Sprintf("worker.ui_listen %s: the fleet page is plain http, so its token travels in clear beyond loopback; put a TLS-terminating proxy in front of it", l))
		}
	}
	if l := c.Worker.WebhookListen; l != "" {
		if host, _, err := net.SplitHostPort(l); err == nil && !Loopback(host) {
			out = append(out, fmt.Sprintf("worker.webhook_listen %s: the merge receiver is plain http, so GitLab's token travels in clear beyond loopback (signatures do not reveal the secret); put a TLS-terminating proxy in front of it", l))
		}
	}
	mods := make([]string, 0, len(c.Modules))
	for name := range c.Modules {
		mods = append(mods, name)
	}
	slices.Sort(mods)
	for _, name := range mods {
		out = append(out, envWarnings("module", name, c.Modules[name].Env)...)
	}
	for _, name := range names {
		out = append(out, envWarnings("machine", name, c.Machines[name].Env)...)
	}
	out = append(out, c.labelWarnings()...)
	out = append(out, c.notifyWarnings()...)
	return append(out, c.analysisWarnings()...)
}

// envWarnings warns of each variable of a module's or machine's env whose
// name says it is a secret: env travels in workflow histories.
func envWarnings(kind, name string, env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if secretName(k) {
			out = append(out, fmt.Sprintf("%s %s: env %s looks like a secret, but %s env is kept in workflow histories (the Web UI shows it); deliver secrets on the host instead", kind, name, k, kind))
		}
	}
	return out
}

// secretName says whether an environment variable's name marks a secret.
func secretName(k string) bool {
	u := strings.ToUpper(k)
	for _, w := range []string{"PASSWORD", "PASSWD", "SECRET", "TOKEN", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// Loopback is whether host (a name or an address, no port) is this
// machine's loopback interface: what may go without a token or TLS.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
