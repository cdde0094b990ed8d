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
