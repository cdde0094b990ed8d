package testsuite

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/agentcmd"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/syncbuf"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// Machines enroll: two host agents started with --enroll ask the worker to
// join, and are pending, shown so by status, with nothing pushed to them.
// One is turned away and gets nothing. The other is admitted with `starter
// machine approve` while a plan waits at its gate: the worker brings it to
// the newest healthy build by a sync it starts itself, without anyone
// merging, and the plan, once approved, keeps the machines it started with
// and does not push it again. Denied afterwards, it leaves the mesh, and
// its machine workflow ends.
func TestAgentsEnrollArePendingAdmittedOrDenied(t *testing.T) {
	t.Parallel()
	o := stackOptions{live: true, enroll: "{modules: [host]}", modules: []string{"host"}, machines: []machineSpec{
		{name: "edge-1", tier: 1, modules: []string{"host"}},
		{name: "core-1", tier: 2, modules: []string{"host"}},
	}}
	s := newStack(t, o)
	first := s.commit("host")
	s.converge("host", first)
	second := s.commit("host")
	held := s.startGated("host", second, 2) // edge-1 runs it healthy

	admit := s.enrollAgent("edge-9", "site=fra1")
	turnAway := s.enrollAgent("edge-10", "site=ams2")
	recs := enroll.In(s.c, s.cfg)
	eventually(t, time.Minute, "both agents are pending", func() bool {
		es, err := recs.List(context.Background(), meshapi.EnrollPending)
		require.NoError(t, err)
		return len(es) == 2
	})
	out, err := s.starter("machine", "pending")
	require.NoError(t, err, out)
	assert.Contains(t, out, "edge-9 ")
	assert.Contains(t, out, "site=fra1")
	out, err = s.starter("status")
	require.NoError(t, err, out)
	assert.Contains(t, out, "pending: edge-10 asked to enroll ")
	assert.Contains(t, out, "nothing is pushed to it until: starter machine approve edge-10")

	out, err = s.starter("machine", "deny", "edge-10", "--by", "ops", "--reason", "not ours")
	require.NoError(t, err, out)
	assert.Equal(t, "turned away edge-10 by ops: it gets nothing; if it was in the mesh, its machine workflow ends once its queue is empty\n", out)
	out, err = s.starter("machine", "approve", "edge-9", "--by", "ops")
	require.NoError(t, err, out)
	assert.Contains(t, out, "admitted edge-9 (host "+admit.url+", labels site=fra1) by ops")
	_, err = s.starter("machine", "approve", "edge-9", "--by", "ops")
	require.ErrorContains(t, err, "machine edge-9 is already admitted (by ops at ")
	_, err = s.starter("machine", "approve", "edge-99", "--by", "ops")
	require.ErrorContains(t, err, "machine edge-99: no enrollment: no agent asked to enroll under that name; no machine is pending")

	sync := s.joinedSync("edge-9", "host")
	desc, err := s.c.DescribeWorkflow(context.Background(), sync, "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	assert.Equal(t, "sync of host on edge-9 by "+workerapp.AdmittedBy, summary)
	b := s.build("host", second)
	admit.runs(t, b)
	admit.waitFor(t, enroll.StateAdmitted)
	turnAway.waitFor(t, enroll.StateDenied)

	_, err = controlPlan(s, held, meshapi.UpdateApprove, meshapi.ApproveInput{By: "enroll test"})
	require.NoError(t, err)
	st := s.wait(held)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	for _, tier := range st.Tiers {
		for _, m := range tier.Machines {
			assert.NotEqual(t, "edge-9", m.Machine, "the plan keeps the machines it started with")
		}
	}
	assert.Len(t, applied(t, admit.client), 1, "edge-9 was sent the build once")
	assert.Empty(t, journalOver(t, turnAway.client), "the machine turned away was sent nothing")
	_, err = s.c.DescribeWorkflow(context.Background(), meshapi.SyncID("edge-10", "host"), "")
	var gone *serviceerror.NotFound
	assert.True(t, errors.As(err, &gone), "no sync for the machine turned away: %v", err)
	out, err = s.starter("status", "--machine", "edge-9")
	require.NoError(t, err, out)
	assert.Contains(t, out, "site=fra1", "status shows the admitted machine with its labels")

	_, err = s.starter("machine", "deny", "edge-9", "--by", "ops", "--reason", "re-imaged")
	require.NoError(t, err)
	s.machineWorkflowEnds("edge-9")
	_, err = s.starter("status", "--machine", "edge-9")
	require.ErrorContains(t, err, "or, if its agent asked to enroll, admit it: starter machine approve edge-9", "a machine out of the mesh again is named as such")
}

// enrolling is a host agent started with --enroll, run in process.
type enrolling struct {
	url    string
	client *host.HTTPClient
	stderr *syncbuf.Buffer
}

// enrollAgent starts the host agent of machine, on the noop runtime, asking
// the stack's enrollment endpoint to join with labels; it stops with the
// test.
func (s *stack) enrollAgent(machine, labels string) *enrolling {
	t := s.t
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "enroll-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(enrollToken+"\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	e := &enrolling{stderr: &syncbuf.Buffer{}}
	done := make(chan error, 1)
	go func() {
		done <- agentcmd.Execute(ctx, []string{"--machine", machine, "--runtime", "noop", "--listen", "127.0.0.1:0",
			"--state", filepath.Join(dir, "state"), "--log-format", "json", "--enroll", s.enrollURL,
			"--enroll-token-file", tokenFile, "--labels", labels, "--enroll-every", "200ms"}, &bytes.Buffer{}, e.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done, "the agent of %s stops cleanly", machine)
	})
	recs := enroll.In(s.c, s.cfg)
	eventually(t, time.Minute, machine+" asks to enroll", func() bool {
		en, ok, err := recs.Get(context.Background(), machine)
		require.NoError(t, err)
		e.url = en.Ask.Host
		return ok
	})
	c, err := host.NewHTTPClient(e.url, "", nil)
	require.NoError(t, err)
	e.client = c
	return e
}

// waitFor waits for the agent to log that its enrollment is in state.
func (e *enrolling) waitFor(t *testing.T, state string) {
	t.Helper()
	eventually(t, time.Minute, "the agent logs that it is "+state, func() bool {
		return strings.Contains(e.stderr.String(), "enrollment "+state+":")
	})
}

// runs asserts the agent reports b running.
func (e *enrolling) runs(t *testing.T, want mesh.Build) {
	t.Helper()
	rep, err := e.client.Report(context.Background())
	require.NoError(t, err)
	r, ok := rep.Running(want.Module)
	require.True(t, ok, "it runs %s", want.Module)
	require.Equal(t, want.Digest, r.Digest)
}

// applied are the entries of c's journal that applied a declaration.
func applied(t *testing.T, c *host.HTTPClient) []agent.Entry {
	t.Helper()
	return slices.DeleteFunc(journalOver(t, c), func(e agent.Entry) bool { return e.Outcome != agent.OutcomeApplied })
}

// TestCaptureEnrollmentHistory records a machine's Enrollment: its ask,
// an ask with new labels while pending, an approve, an approve refused as
// already made, and a deny. Like the other captures it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureEnrollmentHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := stackOptions{live: true, enroll: "{modules: [host]}", modules: []string{"host"}, machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}}}
	s := captureStack(t, o)
	s.converge("host", s.commit("host"))
	recs := enroll.In(s.c, s.cfg)
	ctx := context.Background()
	ask := meshapi.EnrollAsk{Machine: "edge-9", Host: "http://127.0.0.1:7409", Labels: map[string]string{"site": "fra1"}, At: time.Now().UTC()}
	require.NoError(t, recs.Ask(ctx, ask))
	ask.Labels = map[string]string{"site": "ams2"}
	require.NoError(t, recs.Ask(ctx, ask))
	eventually(t, time.Minute, "edge-9 pending with its new labels", func() bool {
		e, ok, err := recs.Get(ctx, "edge-9")
		require.NoError(t, err)
		return ok && e.Ask.Labels["site"] == "ams2"
	})
	d := meshapi.EnrollDecision{By: "capture", Reason: "racked"}
	_, err := recs.Decide(ctx, "edge-9", meshapi.UpdateEnrollApprove, d)
	require.NoError(t, err)
	_, err = recs.Decide(ctx, "edge-9", meshapi.UpdateEnrollApprove, d)
	require.ErrorContains(t, err, "already admitted")
	_, err = recs.Decide(ctx, "edge-9", meshapi.UpdateEnrollDeny, d)
	require.NoError(t, err)
	s.writeHistories(capturedRun{"enrollment", meshapi.EnrollmentID("edge-9"), ""})
}
