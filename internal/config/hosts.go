package config

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/meshroll/meshroll/internal/host"
)

// HostClient is the host API client for the machine: its host and token
// and, for a host whose certificate a private CA issued, its ca_file. The
// worker that pushes to a machine and the starter that asks about it both
// make their client here, so that they reach a host the same way. Errors
// are the host package's, without the machine's name: the caller adds the
// context its reader needs.
func (m Machine) HostClient() (*host.HTTPClient, error) {
	var hc *http.Client
	if m.CAFile != "" {
		var err error
		if hc, err = host.HTTPClientWithCA(m.CAFile); err != nil {
			return nil, err
		}
	}
	return host.NewHTTPClient(m.Host, m.Token.Reveal(), hc)
}

// TokenSettings names where machine's host token is set: its key in the
// mesh config and the environment variable that overrides it (where a
// secret belongs), so that a host turning the token away can be answered
// with the setting to fix.
func TokenSettings(machine string) (key, env string) {
	return "machines." + machine + ".token", envName("machines", machine, "token")
}

// TokenProblem words a host that turned machine name's token away (a 401
// or 403 in err's chain), naming the setting that gives the machine its
// token and what it must match, for the starter's answers and the worker's
// pushes alike; ok is false for any other error.
func (m Machine) TokenProblem(name string, err error) (msg string, ok bool) {
	status, ok := host.Unauthorized(err)
	if !ok {
		return "", false
	}
	key, env := TokenSettings(name)
	const match = "the host agent's own token (its --token-file, or MESHROLL_HOST_TOKEN)"
	if m.Token == "" {
		return fmt.Sprintf("host %s answered %d %s: machine %s has no token; set %s (or %s in the mesh config) to %s",
			m.Host, status, http.StatusText(status), name, env, key, match), true
	}
	return fmt.Sprintf("host %s answered %d %s: it refuses machine %s's token; set %s (or %s in the mesh config) to %s",
		m.Host, status, http.StatusText(status), name, env, key, match), true
}

// Hosts hands out the host API clients of the mesh config's machines, each
// made on first use and kept, since the worker pushes to the same hosts for
// as long as it runs and a kept client reuses its connections. A machine
// whose host, token or ca_file the config in force changes is given a new
// client. It is safe for concurrent use.
type Hosts struct {
	Mesh Source

	mu      sync.Mutex
	clients map[string]keptClient
}

// keptClient is a machine's client and the settings it was made from.
type keptClient struct {
	host.Client
	made Machine
}

// Host returns machine's client. It returns a host.Client, not the
// concrete type, so that *Hosts is what the worker's activities ask for a
// host.
func (h *Hosts) Host(machine string) (host.Client, error) {
	m, ok := h.Mesh.Current().Machines[machine]
	if !ok {
		return nil, fmt.Errorf("machine %q is not in the worker's mesh config", machine)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.clients[machine]; ok && sameHost(c.made, m) {
		return c.Client, nil
	}
	c, err := m.HostClient()
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", machine, err)
	}
	if h.clients == nil {
		h.clients = map[string]keptClient{}
	}
	h.clients[machine] = keptClient{Client: c, made: m}
	return c, nil
}

// sameHost says whether two settings of a machine reach its host the same
// way.
func sameHost(a, b Machine) bool {
	return a.Host == b.Host && a.Token == b.Token && a.CAFile == b.CAFile
}
