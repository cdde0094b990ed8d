package testsuite

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/meshfile"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// Machines join and leave the mesh config while the worker runs, without
// a restart. One added is brought to the newest healthy build of each
// module the config gives it by a sync the worker starts itself, without
// anyone merging. A plan that was waiting at a gate meanwhile keeps the
// machines it started with: once approved it does not push the new one
// (whose host the sync sent the build once), and skips, in words, the one
// that left, sending it nothing; the rest converge as they would have. The
// machine workflow of the one that left ends.
func TestMachinesJoinAndLeaveWithoutARestart(t *testing.T) {
	t.Parallel()
	o := stackOptions{live: true, modules: []string{"host"}, machines: []machineSpec{
		{name: "edge-1", tier: 1, modules: []string{"host"}},
		{name: "core-1", tier: 2, modules: []string{"host"}},
		{name: "core-2", tier: 2, modules: []string{"host"}},
	}}
	s := newStack(t, o)
	first := s.commit("host")
	s.converge("host", first)
	second := s.commit("host")
	held := s.startGated("host", second, 2) // edge-1 runs it healthy
	before := len(s.hosts["core-2"].Received())

	s.file.Machines = slices.DeleteFunc(s.file.Machines, func(m meshfile.Machine) bool { return m.Name == "core-2" })
	s.join(o, machineSpec{name: "edge-2", tier: 2, modules: []string{"host"}})
	sync := s.joinedSync("edge-2", "host")
	b := s.build("host", second)
	s.runs("edge-2", b)
	desc, err := s.c.DescribeWorkflow(context.Background(), sync, "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	assert.Equal(t, "sync of host on edge-2 by "+workerapp.JoinedBy, summary, "the sync says who started it")

	_, err = controlPlan(s, held, meshapi.UpdateApprove, meshapi.ApproveInput{By: "inventory test"})
	require.NoError(t, err)
	st := s.wait(held)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	for _, tier := range st.Tiers {
		for _, m := range tier.Machines {
			assert.NotEqual(t, "edge-2", m.Machine, "the plan keeps the machines it started with")
		}
	}
	left := progress(st, "core-2")
	assert.Equal(t, meshapi.MachineSkipped, left.State)
	assert.Equal(t, "skipped: machine core-2 left the mesh config before its push; nothing was sent to it", left.Reason)
	assert.Len(t, s.hosts["core-2"].Received(), before, "core-2 was sent nothing more")
	s.runs("core-2", s.build("host", first))
	for _, m := range []string{"edge-1", "core-1", "edge-2"} {
		s.runs(m, b)
		s.checkJournal(m)
	}
	assert.Len(t, s.hosts["edge-2"].Applied(), 1, "edge-2 was sent the build once")
	s.machineWorkflowEnds("core-2")
}

// join starts an agent for machine m and adds m to the stack's mesh
// config, written as an editor saving by rename would.
func (s *stack) join(o stackOptions, m machineSpec) {
	s.t.Helper()
	h := newAgentHost(s.t, m.name, s.runtime(o, m.name))
	s.hosts[m.name] = h
	s.file.Machines = append(s.file.Machines, meshfile.Machine{Name: m.name, Host: h.URL(), Tier: m.tier, Modules: m.modules})
	s.writeConfig()
}

// joinedSync waits for the sync the worker starts for module on a machine
// that joined the mesh config, and for it to converge; it returns its ID.
func (s *stack) joinedSync(machine, module string) string {
	s.t.Helper()
	id := meshapi.SyncID(machine, module)
	eventually(s.t, time.Minute, "the worker starts "+id, func() bool {
		_, err := plans.State(context.Background(), s.c, id)
		return err == nil
	})
	st := s.wait(id)
	require.Equal(s.t, meshapi.PlanConverged, st.State, st.Reason)
	return id
}

// machineWorkflowEnds waits for machine's workflow to complete: retired,
// its machine having left the mesh config.
func (s *stack) machineWorkflowEnds(machine string) {
	s.t.Helper()
	eventually(s.t, time.Minute, machine+"'s machine workflow ends", func() bool {
		d, err := s.c.DescribeWorkflow(context.Background(), meshapi.MachineID(machine), "")
		require.NoError(s.t, err)
		return d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
}

// writeConfig writes s.file over the stack's mesh config in one step.
func (s *stack) writeConfig() {
	s.t.Helper()
	tmp := filepath.Join(filepath.Dir(s.configPath), ".mesh.yaml.new")
	require.NoError(s.t, os.WriteFile(tmp, []byte(s.file.String()), 0o644))
	require.NoError(s.t, os.Rename(tmp, s.configPath))
}

// TestCaptureRetireHistory records the workflow of a machine removed from
// the mesh config while the worker runs: one push,
// then the retire signal, and the end. Like the other captures it runs
// only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureRetireHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := exampleMesh()
	o.live = true
	s := captureStack(t, o)
	s.converge("host", s.commit("host"))
	s.file.Machines = slices.DeleteFunc(s.file.Machines, func(m meshfile.Machine) bool { return m.Name == "edge-1" })
	s.writeConfig()
	s.machineWorkflowEnds("edge-1")
	s.writeHistories(capturedRun{"machine-retired", meshapi.MachineID("edge-1"), ""})
}

// The worker command follows its mesh config as the in-process worker
// does: an edit that does not validate is refused in its log, naming the
// key, and changes nothing; the edit that adds a machine brings it to the
// newest healthy build by the worker's own sync.
func TestWorkerCommandFollowsItsMeshConfig(t *testing.T) {
	t.Parallel()
	o := stackOptions{modules: []string{"host"}, machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}}}
	fs := newStack(t, withFaults(o))
	fs.workers.start()
	st := fs.converge("host", fs.commit("host"))

	good := fs.file
	fs.file.Machines = append(slices.Clone(fs.file.Machines), meshfile.Machine{Name: "edge-2", Host: "http://127.0.0.1:1", Tier: 1, Modules: []string{"hots"}})
	fs.writeConfig()
	eventually(t, time.Minute, "the worker to refuse the edit", func() bool {
		return strings.Contains(fs.workers.log.String(), `machines.edge-2.modules: unknown module \"hots\"`)
	})
	fs.file = good
	fs.join(o, machineSpec{name: "edge-2", tier: 1, modules: []string{"host"}})
	fs.joinedSync("edge-2", "host")
	fs.runs("edge-2", *st.Build)
	assert.Contains(t, fs.workers.log.String(), "machine joined: sync started")
}
