package testsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// historyDir holds histories of real runs of both workflows, one JSON file
// per run, named <workflow>-<what happened>.json, and index.json naming each
// file's workflow ID and run ID (a history does not hold its own ID, and the
// plan's ID is part of what it computes). TestReplayHistories replays every
// one of them against today's workflow code.
const historyDir = "testdata/histories"

// execution is one entry of index.json.
type execution struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

func readIndex(t *testing.T) map[string]execution {
	idx := map[string]execution{}
	data, err := os.ReadFile(filepath.Join(historyDir, "index.json"))
	if errors.Is(err, os.ErrNotExist) {
		return idx
	}
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &idx))
	return idx
}

// capturing skips a capture test unless MESHROLL_WRITE_HISTORIES is set:
// histories are rewritten only on purpose.
func capturing(t *testing.T) {
	t.Helper()
	if os.Getenv("MESHROLL_WRITE_HISTORIES") == "" {
		t.Skip("set MESHROLL_WRITE_HISTORIES=1 to record workflow histories into " + historyDir)
	}
}

// writeIndex writes idx back as index.json, after a capture added to it.
func writeIndex(t *testing.T, idx map[string]execution) {
	t.Helper()
	data, err := json.MarshalIndent(idx, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(historyDir, "index.json"), append(data, '\n'), 0o644))
}

// TestReplayHistories fails when a change to workflow code would break a
// plan or machine workflow already running: every committed history must
// replay without a non-determinism error.
func TestReplayHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(historyDir, "*.json"))
	require.NoError(t, err)
	idx := readIndex(t)
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "index.json" {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			exec, ok := idx[filepath.Base(f)]
			require.True(t, ok, "%s is not in index.json", f)
			file, err := os.Open(f)
			require.NoError(t, err)
			defer file.Close()
			h, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
			require.NoError(t, err)
			pushes := newPushOrder(t, h)
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{pushes}, DataConverter: payloads.Converter})
			require.NoError(t, err)
			workerapp.RegisterWorkflows(r)
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: exec.WorkflowID, RunID: exec.RunID},
			}))
			pushes.check()
		})
	}
	require.NotZero(t, n, "no committed histories in %s (MESHROLL_WRITE_HISTORIES=1 scripts/test.sh -run TestCaptureHistories ./testsuite/ makes them)", historyDir)
}

// The committed histories are baseline 3 (2026-12-06): every one was
// recorded from the code of that day, when every version gate before it
// was retired (workflows/versions.go lists them). A change that alters the
// commands a workflow issues adds a gate there and captures histories of
// the new path named <workflow>-<what happened>.<change ID>.json, next to
// these, which keep replaying until the gate is retired in turn.

// TestCaptureHistories records the histories TestReplayHistories replays.
// It runs only with MESHROLL_WRITE_HISTORIES=1: histories are committed
// from the code that made them, and rewritten only on purpose (a new
// workflow type or a GetVersion gate, with the old files kept).
func TestCaptureHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := exampleMesh()
	o.machines = append(o.machines, machineSpec{name: "edge-2", tier: 1, modules: []string{"host"}})
	o.tiers = "{1: {max_parallel: 1, bake: 1s}}"
	o.push = "{retry_budget: 2s, running_timeout: 30s}"
	s := captureStack(t, o)

	// A machine workflow that continues as new after two requests.
	run := s.startMachine(meshapi.MachineInput{Machine: "control-node", ContinueAfter: 2})

	h1, k1 := s.commit("host"), s.commit("mesh-controller")
	s.converge("mesh-controller", k1)
	s.converge("host", h1)
	// Gated host plan composed before a newer controller: rebased at push.
	h2 := s.commit("host")
	gated := s.startGated("host", h2, 2)
	kOld := s.commit("mesh-controller") // merged, but its plan comes late
	k2 := s.commit("mesh-controller")
	s.converge("mesh-controller", k2)
	_, err := controlPlan(s, gated, meshapi.UpdateApprove, meshapi.ApproveInput{By: "capture"})
	require.NoError(t, err)
	require.Equal(t, meshapi.PlanConverged, s.wait(gated).State)
	// Superseded: the late plan of an older controller.
	superseded := s.start("mesh-controller", kOld).ID
	require.Equal(t, meshapi.PlanSuperseded, s.wait(superseded).State)
	// Aborted at a gate.
	h3 := s.commit("host")
	aborted := s.startGated("host", h3, 1)
	_, err = controlPlan(s, aborted, meshapi.UpdateAbort, meshapi.AbortInput{By: "capture", Reason: "recording"})
	require.NoError(t, err)
	require.Equal(t, meshapi.PlanAborted, s.wait(aborted).State)
	// Held by a freeze before its first tier, let go by unfreeze.
	out, err := s.starter("freeze", "--module", "host", "--reason", "recording", "--by", "capture")
	require.NoError(t, err, out)
	frozen := s.start("host", s.commit("host")).ID
	waitFor(t, s, frozen, meshapi.PlanHeld)
	out, err = s.starter("freeze", "list")
	require.NoError(t, err, out)
	out, err = s.starter("unfreeze", "--module", "host", "--by", "capture")
	require.NoError(t, err, out)
	require.Equal(t, meshapi.PlanConverged, s.wait(frozen).State)
	// Halted: edge-1 unreachable.
	s.hosts["edge-1"].SetDown(true)
	h4 := s.commit("host")
	halted := s.start("host", h4).ID
	require.Equal(t, meshapi.PlanHalted, s.wait(halted).State)

	s.writeHistories(
		capturedRun{"plan-converged-gated-rebased", gated, ""},
		capturedRun{"plan-superseded", superseded, ""},
		capturedRun{"plan-aborted-at-gate", aborted, ""},
		capturedRun{"plan-halted-unreachable", halted, ""},
		capturedRun{"plan-held-frozen", frozen, ""},
		capturedRun{"lever-freeze", meshapi.FreezeID("freeze", "host", ""), ""},
		capturedRun{"lever-unfreeze", meshapi.FreezeID("unfreeze", "host", ""), ""},
		capturedRun{"lever-list-freezes", meshapi.FreezesID, ""},
		capturedRun{"machine-continued-as-new", meshapi.MachineID("control-node"), run.GetRunID()},
		capturedRun{"machine-running", meshapi.MachineID("edge-1"), ""},
	)
}

// TestCaptureLeverHistories records the histories of the levers' workflow
// types (RejectBuild, ListBuilds), new types that TestCaptureHistories'
// plans and machines do not run, and of a rollback plan and a sync plan
// (Plans whose input takes them down another path than the build). Like it,
// it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureLeverHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	s := captureStack(t, exampleMesh())
	h1 := s.commit("host")
	s.converge("host", h1)
	s.converge("host", s.commit("host"))
	s.converge("host", s.commit("host"))
	out, err := s.starter("build", "reject", "--module", "host", "--commit", h1, "--reason", "recording", "--by", "capture")
	require.NoError(t, err, out)
	out, err = s.starter("build", "list", "--module", "host")
	require.NoError(t, err, out)
	out, err = s.starter("rollback", "--module", "host", "--reason", "recording", "--by", "capture", "--wait")
	require.NoError(t, err, out)
	s.hosts["edge-1"].forget()
	out, err = s.starter("machine", "sync", "edge-1", "--wait")
	require.NoError(t, err, out)

	s.writeHistories(
		capturedRun{"lever-reject-build", meshapi.RejectID("host", h1), ""},
		capturedRun{"lever-list-builds", meshapi.BuildsID("host"), ""},
		capturedRun{"plan-rollback", meshapi.RollbackID("host"), ""},
		capturedRun{"plan-sync", meshapi.SyncID("edge-1", "host"), ""},
	)
}

// TestCaptureWindowHistory records a plan held outside a deployment window
// and let go by its durable timer (the hold that waits on a timer rather
// than a signal). Like the others it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureWindowHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := exampleMesh()
	o.windows = func() string {
		now := time.Now().UTC()
		start := now.Truncate(time.Minute)
		return fmt.Sprintf(`[{deny: "%d %d * * *", duration: %s, time_zone: UTC, reason: recording}]`,
			start.Minute(), start.Hour(), now.Add(6*time.Second).Sub(start).Round(time.Millisecond))
	}
	s := captureStack(t, o)
	id := s.start("host", s.commit("host")).ID
	waitFor(t, s, id, meshapi.PlanHeld)
	require.Equal(t, meshapi.PlanConverged, s.wait(id).State)

	s.writeHistories(capturedRun{"plan-held-window", id, ""})
}

// TestCapturePushModesHistory records a machine workflow that pushes by
// both kinds of activity in one run, as each request says: control-node's
// machine workflow pushes two plans by regular activities, then the worker
// restarts with push.local_activity and the same run pushes the third
// locally. Like the others it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCapturePushModesHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	s := captureStack(t, exampleMesh())
	s.converge("host", s.commit("host"))
	s.converge("mesh-controller", s.commit("mesh-controller"))
	s.worker.Stop()
	s.cfg.Push.LocalActivity = true
	s.startWorker()
	s.converge("host", s.commit("host"))
	scheduled, markers := s.pushEvents(meshapi.MachineID("control-node"))
	require.Equal(t, 2, scheduled, "two pushes by regular activities")
	require.Equal(t, 1, markers, "then one by a local activity")

	s.writeHistories(capturedRun{"machine-push-modes", meshapi.MachineID("control-node"), ""})
}

// TestCaptureSignalBudgetHistory records a machine workflow run that
// continues as new on reaching its signal budget: control-node's machine
// workflow, started with a budget of two signals, takes two plans' requests
// and continues as new. Like the others it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureSignalBudgetHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	s := captureStack(t, exampleMesh())
	run := s.startMachine(meshapi.MachineInput{Machine: "control-node", SignalBudget: 2})
	s.converge("host", s.commit("host"))
	s.converge("mesh-controller", s.commit("mesh-controller"))
	err := run.GetWithOptions(context.Background(), nil, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
	var continued *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &continued, "the run continued as new at its budget")

	s.writeHistories(capturedRun{"machine-signal-budget", meshapi.MachineID("control-node"), run.GetRunID()})
}

// TestCaptureRelayHistories records a plan that hears its answers through
// relays: a host plan over a tier 1 of 120 machines (two hand-over
// activities, each scheduled in a coroutine of its own since the
// plan-hand-apart change, one relay) and the control node, and its first
// relay. plan-relayed.json, recorded before that change, stays until the
// change is retired. Like the others it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureRelayHistories(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := largeTierMesh(120)
	s := captureStack(t, o)
	st := s.converge("host", s.commit("host"))
	h := s.planHistoryOf(st.Plan)
	require.Equal(t, 2, h.handActivities)
	require.Equal(t, 2, h.relays)
	require.Equal(t, 121, h.answers)

	s.writeHistories(
		capturedRun{"plan-relayed.plan-hand-apart", st.Plan, ""},
		capturedRun{"relay-passed-on", meshapi.RelayID(st.Plan, 0), ""},
	)
}

// TestCaptureHandWindowHistory records a plan whose tier is larger than
// its push.hand_window: 150 machines handed over 60 at a time, as their
// answers (through a relay) make room. Like the others it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureHandWindowHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := largeTierMesh(150)
	o.push = "{relay_above: 100, hand_window: 60}"
	s := captureStack(t, o)
	st := s.converge("host", s.commit("host"))
	h := s.planHistoryOf(st.Plan)
	require.Contains(t, h.markers, "plan-hand-window")
	require.Equal(t, 60, h.mostOpen)

	s.writeHistories(capturedRun{"plan-hand-window", st.Plan, ""})
}

// captureStack stands up a stack on a Temporal server of its own for a
// capture test, its worker named meshroll-capture: the identity every
// committed history carries.
func captureStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	o.identity = "meshroll-capture"
	o.ownServer = true
	return newStack(t, o)
}

// startMachine starts a machine workflow with the input a test chooses
// (a budget, a continue-as-new count), ahead of the plans that would
// start it with the defaults.
func (s *stack) startMachine(in meshapi.MachineInput) client.WorkflowRun {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: meshapi.MachineID(in.Machine), TaskQueue: s.cfg.Temporal.TaskQueue},
		meshapi.MachineWorkflowType, in)
	require.NoError(s.t, err)
	return run
}

// capturedRun names one workflow run whose history a capture saves: the
// file's name, the workflow ID, and the run ID ("" for the latest run).
type capturedRun struct{ name, id, runID string }

// writeHistories saves the runs' histories and names them in index.json.
func (s *stack) writeHistories(runs ...capturedRun) {
	s.t.Helper()
	idx := readIndex(s.t)
	for _, r := range runs {
		s.writeHistoryAs(idx, r.name, r.id, r.runID)
	}
	writeIndex(s.t, idx)
}

// writeHistoryAs saves a workflow run's history as JSON, the format the
// Temporal CLI and Web UI export, under name.
func (s *stack) writeHistoryAs(idx map[string]execution, name, id, runID string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if runID == "" {
		d, err := s.c.DescribeWorkflow(ctx, id, "")
		require.NoError(s.t, err)
		runID = d.WorkflowExecution.RunID
	}
	idx[name+".json"] = execution{WorkflowID: id, RunID: runID}
	it := s.c.GetWorkflowHistory(ctx, id, runID, false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(s.t, err)
		h.Events = append(h.Events, e)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(s.t, err)
	for _, leak := range []string{s.repo, os.Getenv("HOME")} {
		require.False(s.t, leak != "" && strings.Contains(string(data), leak), "history %s names a local path", name)
	}
	require.NoError(s.t, os.MkdirAll(historyDir, 0o755))
	require.NoError(s.t, os.WriteFile(filepath.Join(historyDir, name+".json"), append(data, '\n'), 0o644))
}
