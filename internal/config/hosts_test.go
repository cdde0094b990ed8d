package config

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
)

func TestHostsKeepsOneClientPerMachine(t *testing.T) {
	h := &Hosts{Mesh: &Config{Machines: map[string]Machine{"edge-1": {Host: "http://127.0.0.1:7401", Token: "t"}}}}
	first, err := h.Host("edge-1")
	require.NoError(t, err)
	again, err := h.Host("edge-1")
	require.NoError(t, err)
	assert.Same(t, first, again)
	assert.Equal(t, "http://127.0.0.1:7401", first.(*host.HTTPClient).URL())

	_, err = h.Host("edge-9")
	assert.EqualError(t, err, `machine "edge-9" is not in the worker's mesh config`)
}

func TestHostClientErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca.pem")
	h := &Hosts{Mesh: &Config{Machines: map[string]Machine{
		"edge-1": {Host: "https://edge-1:7400", CAFile: missing},
		"edge-2": {Host: "ftp://edge-2"},
	}}}
	_, err := h.Host("edge-1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "machine edge-1: host CA file: ")

	_, err = h.Host("edge-2")
	assert.EqualError(t, err, `machine edge-2: host url "ftp://edge-2": scheme must be http or https`)
}

// TokenSettings names the variable that really sets the machine's token,
// also for a name with '.' and '-' in it.
func TestTokenSettings(t *testing.T) {
	key, env := TokenSettings("web.prod-2")
	assert.Equal(t, "machines.web.prod-2.token", key)
	assert.Equal(t, "MESHROLL_MACHINES_WEB_PROD_2_TOKEN", env)
	t.Setenv(env, "from-the-variable")
	cfg, err := Parse("mesh.yaml", []byte(`modules: {host: {repo: ., path: h}}
machines: {web.prod-2: {host: "http://127.0.0.1:7400", tier: 1, modules: [host]}}
`))
	require.NoError(t, err)
	assert.Equal(t, "from-the-variable", cfg.Machines["web.prod-2"].Token.Reveal())
}
