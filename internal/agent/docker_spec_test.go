package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

// createdAs is what the engine is asked to create, as it reads it.
type createdAs struct {
	User        string `json:"User"`
	StopTimeout *int   `json:"StopTimeout"`
	HostConfig  struct {
		Mounts []struct {
			Type, Source, Target string
			ReadOnly             bool
		} `json:"Mounts"`
		Memory   int64 `json:"Memory"`
		NanoCpus int64 `json:"NanoCpus"`
	} `json:"HostConfig"`
}

func created(t *testing.T, c mesh.Container) createdAs {
	t.Helper()
	b, err := json.Marshal(createBody("edge-1", c, c.Image+"@"+c.Digest, c.SpecHash()))
	require.NoError(t, err)
	var got createdAs
	require.NoError(t, json.Unmarshal(b, &got))
	return got
}

// A container's settings are what the engine creates it with: a named
// volume and a bind as Mounts, memory and CPUs as limits, its user, and
// its stop grace in seconds (rounded up); left out, the engine's defaults.
func TestDockerCreateBodySettings(t *testing.T) {
	c := dockerCtr("web", 1)
	none := created(t, c)
	assert.Empty(t, none.HostConfig.Mounts)
	assert.Zero(t, none.HostConfig.Memory)
	assert.Zero(t, none.HostConfig.NanoCpus)
	assert.Empty(t, none.User)
	assert.Nil(t, none.StopTimeout, "the engine's own 10s")

	c.Settings = mesh.Settings{
		Volumes:     []mesh.Mount{{Source: "data", Target: "/var/lib/web"}, {Source: "/etc/web", Target: "/etc/web", ReadOnly: true}},
		MemoryBytes: 64 << 20, NanoCPUs: 500_000_000, User: "1000:1000", StopGraceMS: 2500,
	}
	got := created(t, c)
	require.Len(t, got.HostConfig.Mounts, 2)
	assert.Equal(t, "volume", got.HostConfig.Mounts[0].Type)
	assert.Equal(t, "data", got.HostConfig.Mounts[0].Source)
	assert.Equal(t, "/var/lib/web", got.HostConfig.Mounts[0].Target)
	assert.False(t, got.HostConfig.Mounts[0].ReadOnly)
	assert.Equal(t, "bind", got.HostConfig.Mounts[1].Type)
	assert.Equal(t, "/etc/web", got.HostConfig.Mounts[1].Source)
	assert.True(t, got.HostConfig.Mounts[1].ReadOnly)
	assert.Equal(t, int64(64<<20), got.HostConfig.Memory)
	assert.Equal(t, int64(500_000_000), got.HostConfig.NanoCpus)
	assert.Equal(t, "1000:1000", got.User)
	require.NotNil(t, got.StopTimeout)
	assert.Equal(t, 3, *got.StopTimeout, "2.5s rounds up to 3s: never less grace than declared")
}
