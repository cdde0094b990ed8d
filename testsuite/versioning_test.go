package testsuite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// versionedWorker starts a worker of the stack's mesh joined to deployment
// with buildID, and makes it the deployment's current version.
func versionedWorker(t *testing.T, s *stack, deployment, buildID string) {
	t.Helper()
	cfg := *s.cfg
	cfg.Worker.Versioning = config.Versioning{Enabled: true, DeploymentName: deployment, BuildID: buildID}
	require.NoError(t, workerapp.CheckVersioning(cfg.Worker.Versioning))
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	w := workerapp.New(s.c, &cfg, s.repo, workerapp.Deps{Catalogue: s.cat, Builder: s.builder, Hosts: &config.Hosts{Mesh: &cfg}}, log)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, workerapp.MakeCurrent(ctx, s.c, cfg.Worker.Versioning, log), "make build %s of %s current", buildID, deployment)
}

// runsOn describes a workflow's latest run: its versioning behaviour and
// the build it is on.
func runsOn(t *testing.T, s *stack, id string) (enumspb.VersioningBehavior, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := s.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	vi := d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo()
	return vi.GetBehavior(), vi.GetDeploymentVersion().GetBuildId()
}

// lastRun is the run ID of workflow id's latest run.
func lastRun(t *testing.T, s *stack, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := s.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	return d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// runsOnUntil waits until workflow id runs on buildID.
func runsOnUntil(t *testing.T, s *stack, id, buildID string) enumspb.VersioningBehavior {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, got := runsOn(t, s, id)
		if got == buildID {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s to run on build %s: it runs on %q (%s)", id, buildID, got, b)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestWorkerVersioningUpgrade(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{
		modules: []string{"svc"},
		machines: []machineSpec{
			{name: "edge-1", tier: 0, modules: []string{"svc"}},
			{name: "edge-2", tier: 1, modules: []string{"svc"}},
		},
		// Every plan hears its machines through relays, on the relays'
		// own task queue: a pinned plan's relays must run on its build.
		push: "{relay_above: 1}",
	})
	s.worker.Stop() // the stack's unversioned worker
	deployment := "meshroll-" + strings.ToLower(sanitize(t.Name()))

	versionedWorker(t, s, deployment, "build-a")
	// edge-1's machine workflow continues-as-new after every push, to show
	// what a continued run does under versioning.
	edge1 := meshapi.MachineID("edge-1")
	s.startMachine(meshapi.MachineInput{Machine: "edge-1", ContinueAfter: 1})
	first := s.start("svc", s.git("rev-parse", "HEAD"), 1)
	waitFor(t, s, first.ID, meshapi.PlanGated)
	b, _ := runsOn(t, s, first.ID)
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, b, "plans are pinned")
	runsOnUntil(t, s, first.ID, "build-a")
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE, runsOnUntil(t, s, edge1, "build-a"), "machine workflows auto-upgrade")

	// Build B becomes current while the first plan waits at its gate.
	versionedWorker(t, s, deployment, "build-b")
	one := 1
	_, err := controlPlan(s, first.ID, meshapi.UpdateApprove, meshapi.ApproveInput{Tier: &one, By: "test"})
	require.NoError(t, err)
	st := waitFor(t, s, first.ID, meshapi.PlanConverged)
	assert.Equal(t, meshapi.PlanConverged, st.State)
	b, build := runsOn(t, s, first.ID)
	assert.Equal(t, "build-a", build, "the plan in flight finished on the build that started it")
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, b)
	b, build = runsOn(t, s, meshapi.RelayID(first.ID, 1))
	assert.Equal(t, "build-a", build, "the relay the plan started after B became current ran on the plan's build")
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, b)
	// An operator finds the plans still on A (step 3 of docs/observability.md).
	pinnedToA := "TemporalWorkerDeploymentVersion='" + deployment + ":build-a' AND WorkflowType='" + meshapi.PlanWorkflowType + "'"
	deadline := time.Now().Add(time.Minute)
	for {
		ids := s.list(pinnedToA)
		if len(ids) == 1 && ids[0] == first.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s to list the plan pinned to build-a (%s): got %v", pinnedToA, first.ID, ids)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
	// edge-2's machine workflow started after B became current.
	runsOnUntil(t, s, meshapi.MachineID("edge-2"), "build-b")

	continued := lastRun(t, s, edge1)
	second := s.start("svc", s.commit("svc"))
	waitFor(t, s, second.ID, meshapi.PlanConverged)
	_, build = runsOn(t, s, second.ID)
	assert.Equal(t, "build-b", build, "a new plan runs on the current build")
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE, runsOnUntil(t, s, edge1, "build-b"),
		"edge-1's machine workflow, started on A, moved to B")
	deadline = time.Now().Add(time.Minute)
	for lastRun(t, s, edge1) == continued {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s to continue-as-new after its push (run %s)", edge1, continued)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
	b, build = runsOn(t, s, edge1)
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE, b, "a continued machine run stays auto-upgrade")
	assert.Equal(t, "build-b", build, "and runs on the current build")
	s.checkJournal("edge-1")
	s.checkJournal("edge-2")
}
