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
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
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
			r := worker.NewWorkflowReplayer()
			workerapp.RegisterWorkflows(r)
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: exec.WorkflowID, RunID: exec.RunID},
			}))
		})
	}
	require.NotZero(t, n, "no committed histories in %s (MESHROLL_WRITE_HISTORIES=1 scripts/test.sh -run TestCaptureHistories ./testsuite/ makes them)", historyDir)
}

// captureTag names the histories TestCaptureHistories writes. Change it
// whenever workflow code changes the commands it issues (behind a
// workflow.GetVersion gate or a new workflow type): the histories of the
// code before stay, and must keep replaying until their version branch is
// retired (see package workflows).
//
//   - "" (no tag): the baseline of 2026-12-03, when the versions
//     "search-attributes", "batches" and "push-answers" were retired and
//     their code became the only code.
//   - "tier-policies": plans push each tier by its policy (batches of
//     max_parallel, a failure budget, a bake, the control plane alone;
//     version "tier-policies" of Plan). The capture's tier 1 has two
//     machines pushed one at a time and a one-second bake.
//   - "holds": plans check freezes and deployment windows before every
//     batch (version "holds" of Plan); the capture adds a plan held by a
//     freeze and let go by unfreeze, and the freeze levers' workflows
//     (Freeze, Unfreeze, ListFreezes).
//   - "failed-endings": a plan that ends halted, refused or aborted fails
//     its workflow with its state as the failure's details (version
//     "failed-endings" of Plan), so the Web UI shows it failed.
//   - "analysis" (analysisCaptureTag, TestCaptureAnalysisHistories): a
//     tier's analysis checks (version "analysis" of Plan): passed, failed
//     and put back, inconclusive and approved.
//   - "local-push" (localPushCaptureTag, TestCaptureLocalPushHistory): a
//     machine workflow started with LocalPush, pushing by local
//     activities (no version gate: the run's input chooses).
//   - "build-compose": a plan of at most one compose batch builds and
//     composes in one activity (version "build-compose" of Plan); the
//     capture's machine workflows carry "request-push-mode" too.
//   - "request-push-mode" (requestPushModeCaptureTag,
//     TestCaptureRequestPushModeHistory): each request says how it is
//     pushed (version "request-push-mode" of Machine); the capture's
//     machine workflow pushes by a regular activity, then, the setting
//     turned on, by a local one, in one run.
//   - "hand-activities" (handActivitiesCaptureTag,
//     TestCaptureHandActivitiesHistory): a plan hands a tier of more than
//     50 machines over by regular activities of 100 (version
//     "hand-activities" of Plan).
//   - "signal-budget" (signalBudgetCaptureTag,
//     TestCaptureSignalBudgetHistory): a machine workflow run continues as
//     new once its signals reach its budget (version "signal-budget" of
//     Machine).
const captureTag = "build-compose"

// TestCaptureHistories records the histories TestReplayHistories replays.
// It runs only with MESHROLL_WRITE_HISTORIES=1: histories are committed
// from the code that made them, and rewritten only on purpose (a new
// workflow type or a GetVersion gate, with the old files kept).
func TestCaptureHistories(t *testing.T) {
	capturing(t)
	o := exampleMesh()
	o.machines = append(o.machines, machineSpec{name: "edge-2", tier: 1, modules: []string{"host"}})
	o.tiers = "{1: {max_parallel: 1, bake: 1s}}"
	o.push = "{retry_budget: 2s, running_timeout: 30s}"
	o.identity = "meshroll-capture"
	s := newStack(t, o)
	ctx := context.Background()

	// A machine workflow that continues as new after two requests.
	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: meshapi.MachineID("control-node"), TaskQueue: s.cfg.Temporal.TaskQueue},
		meshapi.MachineWorkflowType, meshapi.MachineInput{Machine: "control-node", ContinueAfter: 2})
	require.NoError(t, err)

	h1, k1 := s.commit("host"), s.commit("mesh-controller")
	s.converge("mesh-controller", k1)
	s.converge("host", h1)
	// Gated host plan composed before a newer controller: rebased at push.
	h2 := s.commit("host")
	gated := s.start("host", h2, 2).ID
	waitFor(t, s, gated, meshapi.PlanGated)
	kOld := s.commit("mesh-controller") // merged, but its plan comes late
	k2 := s.commit("mesh-controller")
	s.converge("mesh-controller", k2)
	_, err = controlPlan(s, gated, meshapi.UpdateApprove, meshapi.ApproveInput{By: "capture"})
	require.NoError(t, err)
	require.Equal(t, meshapi.PlanConverged, s.wait(gated).State)
	// Superseded: the late plan of an older controller.
	superseded := s.start("mesh-controller", kOld).ID
	require.Equal(t, meshapi.PlanSuperseded, s.wait(superseded).State)
	// Aborted at a gate.
	h3 := s.commit("host")
	aborted := s.start("host", h3, 1).ID
	waitFor(t, s, aborted, meshapi.PlanGated)
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

	require.NoError(t, os.MkdirAll(historyDir, 0o755))
	idx := readIndex(t)
	s.writeHistory(idx, "plan-converged-gated-rebased", gated, "")
	s.writeHistory(idx, "plan-superseded", superseded, "")
	s.writeHistory(idx, "plan-aborted-at-gate", aborted, "")
	s.writeHistory(idx, "plan-halted-unreachable", halted, "")
	s.writeHistory(idx, "plan-held-frozen", frozen, "")
	s.writeHistory(idx, "lever-freeze", meshapi.FreezeID("freeze", "host", ""), "")
	s.writeHistory(idx, "lever-unfreeze", meshapi.FreezeID("unfreeze", "host", ""), "")
	s.writeHistory(idx, "lever-list-freezes", meshapi.FreezesID, "")
	s.writeHistory(idx, "machine-continued-as-new", meshapi.MachineID("control-node"), run.GetRunID())
	s.writeHistory(idx, "machine-running", meshapi.MachineID("edge-1"), "")
	writeIndex(t, idx)
}

// TestCaptureLeverHistories records the histories of the levers' workflow
// types (RejectBuild, ListBuilds), new types that TestCaptureHistories'
// plans and machines do not run, and of a rollback plan and a sync plan
// (Plans whose input takes them down another path than the build). Like it, it runs only with
// MESHROLL_WRITE_HISTORIES=1, and its files carry no capture tag until a
// lever's commands change.
func TestCaptureLeverHistories(t *testing.T) {
	capturing(t)
	o := exampleMesh()
	o.identity = "meshroll-capture"
	s := newStack(t, o)
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

	idx := readIndex(t)
	s.writeHistoryAs(idx, "lever-reject-build", meshapi.RejectID("host", h1), "")
	s.writeHistoryAs(idx, "lever-list-builds", meshapi.BuildsID("host"), "")
	s.writeHistoryAs(idx, "plan-rollback", meshapi.RollbackID("host"), "")
	s.writeHistoryAs(idx, "plan-sync", meshapi.SyncID("edge-1", "host"), "")
	writeIndex(t, idx)
}

// TestCaptureWindowHistory records a plan held outside a deployment window
// and let go by its durable timer (the path of version "holds" that waits
// on a timer rather than a signal), under the capture tag. Like the others
// it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureWindowHistory(t *testing.T) {
	capturing(t)
	o := exampleMesh()
	o.identity = "meshroll-capture"
	o.windows = func() string {
		now := time.Now().UTC()
		start := now.Truncate(time.Minute)
		return fmt.Sprintf(`[{deny: "%d %d * * *", duration: %s, time_zone: UTC, reason: recording}]`,
			start.Minute(), start.Hour(), now.Add(6*time.Second).Sub(start).Round(time.Millisecond))
	}
	s := newStack(t, o)
	id := s.start("host", s.commit("host")).ID
	waitFor(t, s, id, meshapi.PlanHeld)
	require.Equal(t, meshapi.PlanConverged, s.wait(id).State)

	idx := readIndex(t)
	s.writeHistory(idx, "plan-held-window", id, "")
	writeIndex(t, idx)
}

// localPushCaptureTag names the history of a machine workflow started with
// LocalPush (push.local_activity), whose pushes are local activities: the
// same workflow code down the other branch of pushNext, chosen by the
// run's input rather than a GetVersion gate.
const localPushCaptureTag = "local-push"

// TestCaptureLocalPushHistory records it: three plans through a mesh with
// push.local_activity, so that control-node's machine workflow pushes
// three times (host, the controller, a newer host), the first one as it
// starts. Like the others it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureLocalPushHistory(t *testing.T) {
	capturing(t)
	o := exampleMesh()
	o.identity = "meshroll-capture"
	o.push = "{local_activity: true}"
	s := newStack(t, o)
	s.converge("host", s.commit("host"))
	s.converge("mesh-controller", s.commit("mesh-controller"))
	s.converge("host", s.commit("host"))
	scheduled, markers := s.pushEvents(meshapi.MachineID("control-node"))
	require.Zero(t, scheduled, "the captured machine workflow pushed by local activities only")
	require.GreaterOrEqual(t, markers, 3)

	idx := readIndex(t)
	s.writeHistoryAs(idx, "machine-local-push."+localPushCaptureTag, meshapi.MachineID("control-node"), "")
	writeIndex(t, idx)
}

// requestPushModeCaptureTag names the history of a machine workflow whose
// requests say how each is pushed (version "request-push-mode").
const requestPushModeCaptureTag = "request-push-mode"

// TestCaptureRequestPushModeHistory records it: control-node's machine
// workflow pushes two plans by regular activities, then the worker restarts
// with push.local_activity and the same run pushes the third locally. Like
// the others it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureRequestPushModeHistory(t *testing.T) {
	capturing(t)
	o := exampleMesh()
	o.identity = "meshroll-capture"
	s := newStack(t, o)
	s.converge("host", s.commit("host"))
	s.converge("mesh-controller", s.commit("mesh-controller"))
	s.worker.Stop()
	s.cfg.Push.LocalActivity = true
	s.startWorker()
	s.converge("host", s.commit("host"))
	scheduled, markers := s.pushEvents(meshapi.MachineID("control-node"))
	require.Equal(t, 2, scheduled, "two pushes by regular activities")
	require.Equal(t, 1, markers, "then one by a local activity")

	idx := readIndex(t)
	s.writeHistoryAs(idx, "machine-push-mode."+requestPushModeCaptureTag, meshapi.MachineID("control-node"), "")
	writeIndex(t, idx)
}

// signalBudgetCaptureTag names the history of a machine workflow run that
// continued as new on reaching its signal budget (version "signal-budget").
const signalBudgetCaptureTag = "signal-budget"

// TestCaptureSignalBudgetHistory records it: control-node's machine
// workflow, started with a budget of two signals, takes two plans' requests
// and continues as new. Like the others it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureSignalBudgetHistory(t *testing.T) {
	capturing(t)
	o := exampleMesh()
	o.identity = "meshroll-capture"
	s := newStack(t, o)
	run, err := s.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: meshapi.MachineID("control-node"), TaskQueue: s.cfg.Temporal.TaskQueue},
		meshapi.MachineWorkflowType, meshapi.MachineInput{Machine: "control-node", SignalBudget: 2})
	require.NoError(t, err)
	s.converge("host", s.commit("host"))
	s.converge("mesh-controller", s.commit("mesh-controller"))
	err = run.GetWithOptions(context.Background(), nil, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
	var continued *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &continued, "the run continued as new at its budget")

	idx := readIndex(t)
	s.writeHistoryAs(idx, "machine-signal-budget."+signalBudgetCaptureTag, meshapi.MachineID("control-node"), run.GetRunID())
	writeIndex(t, idx)
}

// handActivitiesCaptureTag names the history of a plan that handed a large
// tier over by regular activities (version "hand-activities").
const handActivitiesCaptureTag = "hand-activities"

// TestCaptureHandActivitiesHistory records it: a host plan over a tier 1 of
// 120 machines (two activities) and the control node. Like the others it
// runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureHandActivitiesHistory(t *testing.T) {
	capturing(t)
	o := largeTierMesh(120)
	o.identity = "meshroll-capture"
	s := newStack(t, o)
	st := s.converge("host", s.commit("host"))
	hand, failed := s.planTasks(st.Plan)
	require.Equal(t, 2, hand)
	require.Zero(t, failed)

	idx := readIndex(t)
	s.writeHistoryAs(idx, "plan-large-tier."+handActivitiesCaptureTag, st.Plan, "")
	writeIndex(t, idx)
}

// writeHistory saves a workflow run's history as JSON, the format the
// Temporal CLI and Web UI export.
func (s *stack) writeHistory(idx map[string]execution, name, id, runID string) {
	s.t.Helper()
	if captureTag != "" {
		name += "." + captureTag
	}
	s.writeHistoryAs(idx, name, id, runID)
}

// writeHistoryAs saves the run's history under name as it is given.
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
	require.NoError(s.t, os.WriteFile(filepath.Join(historyDir, name+".json"), append(data, '\n'), 0o644))
}
