package testsuite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// buildAttempt is the attempt number of the plan's pending build activity
// (Build, or BuildAndCompose for a plan of up to 100 machines)
// and its last failure, if it has one pending.
func (fs *stack) buildAttempt(id string) (int32, string) {
	fs.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := fs.c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return 0, ""
	}
	for _, a := range d.RawResponse.GetPendingActivities() {
		if n := a.ActivityType.GetName(); n == "Build" || n == "BuildAndCompose" {
			msg := ""
			if f := a.GetLastFailure(); f != nil {
				msg = f.GetMessage()
			}
			return a.Attempt, msg
		}
	}
	return 0, ""
}

// The embedded registry (persistent directory) stopped and started again
// on the same port and directory, for real, at two moments:
//
//   - during a build: the build's push fails; the build activity retries
//     (its policy: 4 attempts over about 14 s), and with the registry back
//     before the last attempt the plan converges. Left down, the plan halts
//     at the build tier naming the registry's address, and nothing is
//     pushed to any machine.
//   - during a pull by the exec runtime on the host: the declaration is
//     applied, the pull fails while the registry is down and is retried;
//     with the registry back the machine runs the build and the plan
//     converges.
func TestFaultRegistryDown(t *testing.T) {
	t.Parallel()
	o := stackOptions{faults: true, noAgents: true,
		images:   true,
		push:     "{running_timeout: 2m, retry_budget: 1m}",
		modules:  []string{"host"},
		machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}},
	}
	fs := newStack(t, o)
	h := newHostProc(t, filepath.Join(dsBuild(t, "host"), "host"), "edge-1", fs.regAddr, fs.proxies["edge-1"])
	fs.workers.start()

	// During a build: down, the first attempt fails naming the registry,
	// up again, converged.
	fs.stopRegistry()
	c1 := fs.commit("host")
	id := fs.start("host", c1).ID
	var failure string
	eventually(t, 2*time.Minute, "the build's first attempt failing on the registry", func() bool {
		n, msg := fs.buildAttempt(id)
		failure = msg
		return n >= 2 && msg != ""
	})
	require.Contains(t, failure, fs.regAddr, "the build's failure names the registry")
	fs.startRegistry()
	st := fs.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	runsBuild(t, "edge-1", h.report(), *st.Build)

	// Down beyond the build's retries: halted at the build tier, naming the
	// registry, nothing sent.
	before := len(journalOver(t, h.client()))
	fs.stopRegistry()
	st = fs.wait(fs.start("host", fs.commit("host")).ID)
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, fs.regAddr, "the plan names the registry")
	require.Equal(t, meshapi.TierSkipped, st.Tiers[0].State, "no machine was pushed")
	require.Len(t, journalOver(t, h.client()), before, "the host was told nothing")
	fs.startRegistry()

	// During the pull: the plan built and composed, held at its gate; the
	// registry goes down, the gate opens, the host takes the declaration
	// and fails to pull; the registry comes back and the machine and the
	// plan converge.
	c3 := fs.commit("host")
	id = fs.start("host", c3, 1).ID
	waitFor(t, fs, id, meshapi.PlanGated)
	fs.stopRegistry()
	_, err := controlPlan(fs, id, meshapi.UpdateApprove, meshapi.ApproveInput{By: "fault test"})
	require.NoError(t, err)
	eventually(t, time.Minute, "edge-1's exec runtime failing to pull", func() bool {
		return strings.Contains(h.log.String(), fs.regAddr) && strings.Contains(h.log.String(), "retrying in")
	})
	desc, err := fs.c.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.Status,
		"the plan waits for the pull: %s", fs.planState(id).Reason)
	fs.startRegistry()
	st = fs.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	runsBuild(t, "edge-1", h.report(), *st.Build)

	tl := tallyJournal(t, "edge-1", journalOver(t, h.client()))
	require.Equal(t, 2, tl.applied, "two plans reached the host, each applied once")
	require.Zero(t, tl.doubles)
	require.Zero(t, tl.downgrades)
	t.Logf("registry stops: 3 (build, build beyond budget, pull); applied %d, double applies %d, downgrades %d", tl.applied, tl.doubles, tl.downgrades)
}
