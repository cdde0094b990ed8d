package plans

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshroll/meshroll/internal/meshapi"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

func TestQuery(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    ListFilter
		want string
	}{
		{"no filter", ListFilter{}, `WorkflowType = 'Plan'`},
		{"task queue", ListFilter{TaskQueue: "meshroll"}, `WorkflowType = 'Plan' AND TaskQueue = 'meshroll'`},
		{"module", ListFilter{Module: "host"}, `WorkflowType = 'Plan' AND MeshrollModule = 'host'`},
		{"commit", ListFilter{Commit: commit}, `WorkflowType = 'Plan' AND MeshrollCommit = '` + commit + `'`},
		{"machine", ListFilter{Machine: "edge-1"}, `WorkflowType = 'Plan' AND MeshrollMachines = 'edge-1'`},
		{"machines a selector picks", ListFilter{AnyMachine: []string{"edge-1", "edge-3"}}, `WorkflowType = 'Plan' AND MeshrollMachines IN ('edge-1', 'edge-3')`},
		{"state", ListFilter{State: meshapi.PlanHalted}, `WorkflowType = 'Plan' AND MeshrollState = 'halted'`},
		{"held", ListFilter{State: meshapi.PlanHeld}, `WorkflowType = 'Plan' AND MeshrollState = 'held'`},
		// The plans an unfreeze tells: those still running, whatever they show.
		{"running", ListFilter{TaskQueue: "q", Running: true}, `WorkflowType = 'Plan' AND TaskQueue = 'q' AND ExecutionStatus = 'Running'`},
		{"all", ListFilter{TaskQueue: "q", Module: "mesh-controller", Commit: commit, Machine: "control-node", State: meshapi.PlanConverged, Limit: 5},
			`WorkflowType = 'Plan' AND TaskQueue = 'q' AND MeshrollModule = 'mesh-controller' AND MeshrollCommit = '` + commit +
				`' AND MeshrollMachines = 'control-node' AND MeshrollState = 'converged'`},
		// The task queue comes from the config, not the command line, and is
		// escaped rather than validated.
		{"escaped task queue", ListFilter{TaskQueue: `a'b\c`}, `WorkflowType = 'Plan' AND TaskQueue = 'a\'b\\c'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Query(tc.f)
			require.NoError(t, err)
			assert.Equal(t, tc.want, q)
		})
	}
}

func TestQueryRejectsWhatCannotMatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    ListFilter
		want string
	}{
		{"module injection", ListFilter{Module: "x' OR 1=1"}, `module name "x' OR 1=1"`},
		{"module injection quotes", ListFilter{Module: "x' OR 'a'='a"}, "module name"},
		{"module with backslash", ListFilter{Module: `x\`}, "module name"},
		{"module upper case", ListFilter{Module: "Host"}, "module name"},
		{"machine injection", ListFilter{Machine: "edge-1' OR MeshrollState = 'x"}, "machine name"},
		{"machine empty-ish", ListFilter{Machine: " "}, "machine name"},
		{"selected machine injection", ListFilter{AnyMachine: []string{"edge-1') OR (1=1"}}, "machine name"},
		{"commit injection", ListFilter{Commit: commit + "' OR 1=1"}, "not a full commit id"},
		{"short commit", ListFilter{Commit: commit[:12]}, "not a full commit id"},
		{"state injection", ListFilter{State: "converged' OR 1=1"}, "is not one of building, composing"},
		{"state case", ListFilter{State: "Converged"}, "is not one of"},
		{"workflow status is not a state", ListFilter{State: "running"}, "is not one of"},
		{"negative limit", ListFilter{Limit: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Query(tc.f)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, q)
		})
	}
}

func payload(t *testing.T, v any, typ string) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	p.Metadata["type"] = []byte(typ)
	return p
}

func TestSummarize(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	closed := start.Add(time.Minute)
	id := meshapi.PlanID("host", commit)
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-1"},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		StartTime: timestamppb.New(start),
		CloseTime: timestamppb.New(closed),
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			"MeshrollModule":   payload(t, "host", "Keyword"),
			"MeshrollCommit":   payload(t, commit, "Keyword"),
			"MeshrollState":    payload(t, "converged", "Keyword"),
			"MeshrollMachines": payload(t, []string{"edge-1", "control-node"}, "KeywordList"),
		}},
	}
	assert.Equal(t, Summary{
		Plan: id, RunID: "run-1", Module: "host", Commit: commit, State: "converged", Status: "completed",
		Started: start, Closed: &closed, Machines: []string{"edge-1", "control-node"},
	}, summarize(info))

	// Without search attributes: module and commit from the ID, state from
	// the status; a running plan has no close time even if the server sends
	// a zero one.
	info = &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-2"},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		StartTime: timestamppb.New(start),
		CloseTime: timestamppb.New(time.Time{}),
	}
	assert.Equal(t, Summary{
		Plan: id, RunID: "run-2", Module: "host", Commit: commit, State: "running", Status: "running",
		Started: start, Machines: []string{},
	}, summarize(info))

	// An undecodable attribute is left out rather than failing the list.
	bad := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/plain")}, Data: []byte{0xff}}
	info.SearchAttributes = &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"MeshrollState": bad, "MeshrollMachines": bad}}
	s := summarize(info)
	assert.Equal(t, "running", s.State)
	assert.Equal(t, []string{}, s.Machines)
}

func TestStatus(t *testing.T) {
	assert.Equal(t, "running", Status(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING))
	assert.Equal(t, "continued_as_new", Status(enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW))
	assert.Equal(t, "timed_out", Status(enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT))
	assert.Equal(t, "terminated", Status(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED))
}

func TestListErrorNamesMissingSearchAttribute(t *testing.T) {
	// What a dev server answers for a query on an unregistered attribute.
	refused := serviceerror.NewInvalidArgument("invalid query: invalid expression: column name 'MeshrollState' is not a valid search attribute")
	err := listError("default", "q", refused)
	require.ErrorIs(t, err, ErrSearchAttributes)
	require.ErrorAs(t, err, new(*serviceerror.InvalidArgument))
	assert.Contains(t, err.Error(), "temporal operator search-attribute create --namespace default --name MeshrollState --type Keyword")

	// Other refusals are not blamed on the attributes, even when the query
	// they quote names one.
	other := serviceerror.NewInvalidArgument("invalid query: syntax error near MeshrollModule")
	err = listError("default", "MeshrollModule = 'x'", other)
	assert.NotErrorIs(t, err, ErrSearchAttributes)
	assert.Equal(t, "list plans (query MeshrollModule = 'x'): invalid query: syntax error near MeshrollModule", err.Error())
}
