package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Warnings lists what is allowed but unsafe in a valid config, for the
// worker to log at start: a host token sent in clear over plain http to a
// host that is not on loopback, and a host reached over the network with no
// token at all (anyone who can reach the agent could then declare what it
// runs). They are warnings, not errors, because a lab network or a tunnel
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
		if err != nil || u.Scheme != "http" || loopback(u.Hostname()) {
			continue
		}
		if m.Token != "" {
			out = append(out, fmt.Sprintf("machine %s: its host token is sent in clear to %s; serve the host API over https (host --tls-cert, machines.%s.ca_file)", name, u.Host, name))
		} else {
			out = append(out, fmt.Sprintf("machine %s: no token for %s, so anyone who can reach it can declare what it runs; set %s and start the host with --token-file", name, u.Host, envName("machines", name, "token")))
		}
	}
	return out
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
