package stack

import (
	"context"
	"fmt"
	"os"
	"syscall"
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

// TestMain lets a mesh re-execute this test binary as its agents
// processes.
func TestMain(m *testing.M) {
	if ChildRequested() {
		if err := RunChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A fleet larger than one process's share of agents is served by agents
// processes, each machine's agent answering at its own address, and
// Close ends them.
func TestMeshServesALargeFleetFromAgentsProcesses(t *testing.T) {
	srv := &Server{hostPort: "127.0.0.1:7233"}
	var specs []MachineSpec
	for i := range 5 {
		specs = append(specs, MachineSpec{Name: fmt.Sprintf("m%d", i), Tier: 1, Modules: []string{"host"}})
	}
	ctx := context.Background()
	m, err := NewMesh(ctx, srv, MeshOptions{TaskQueue: "bench-test", Modules: []string{"host"}, Machines: specs, AgentsPerProcess: 2})
	require.NoError(t, err)
	require.Len(t, m.children, 3, "two machines a process")
	require.Empty(t, m.served, "none served by the bench process")
	pids := map[int]bool{}
	for _, c := range m.children {
		pids[c.Pid()] = true
	}
	for _, spec := range specs {
		hc, err := m.Config.Machines[spec.Name].HostClient()
		require.NoError(t, err)
		_, err = hc.Report(ctx)
		require.NoError(t, err, "%s's agent answers at %s", spec.Name, m.URLs[spec.Name])
	}
	require.NoError(t, m.Close())
	for pid := range pids {
		require.Error(t, syscall.Kill(pid, 0), "agents process %d ended", pid)
	}
}
