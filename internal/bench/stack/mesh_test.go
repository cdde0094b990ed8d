package stack

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A mesh on a server started with LocalPush asks its workers for local
// pushes, and one without does not: the bench's -local-push A/B.
func TestMeshLocalPush(t *testing.T) {
	for _, local := range []bool{false, true} {
		srv := &Server{hostPort: "127.0.0.1:7233", LocalPush: local}
		m, err := NewMesh(context.Background(), srv, MeshOptions{
			TaskQueue: "bench-test", Modules: []string{"host"},
			Machines: []MachineSpec{{Name: "m1", Tier: 1, Modules: []string{"host"}}},
		})
		require.NoError(t, err)
		require.Equal(t, local, m.Config.Push.LocalActivity)
		require.NoError(t, m.Close())
	}
}
