package plans

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// ErrSearchAttributes is wrapped when the server refuses a list query
// because meshroll's search attributes are not registered on the namespace,
// so that callers can tell "register them" from a broken server.
var ErrSearchAttributes = errors.New("meshroll search attributes not registered")

// PlanStates are the values a plan's MeshrollState search attribute takes
// (PlanState.State), in the order a plan goes through them. ListFilter.State
// must be one of them: anything else could never match.
var PlanStates = []meshapi.PlanStatus{
	meshapi.PlanBuilding, meshapi.PlanComposing, meshapi.PlanPushing, meshapi.PlanGated, meshapi.PlanPaused, meshapi.PlanHeld,
	meshapi.PlanConverged, meshapi.PlanSuperseded, meshapi.PlanHalted, meshapi.PlanRefused, meshapi.PlanAborted,
}

// StateNames lists PlanStates for a person: "building, composing, ...".
func StateNames() string {
	names := make([]string, len(PlanStates))
	for i, s := range PlanStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ListFilter selects plans. Empty fields do not filter.
type ListFilter struct {
	// TaskQueue keeps the list to one mesh's plans when several meshes
	// share a namespace (each has its own task queue).
	TaskQueue string
	Module    string
	Commit    string
	// Machine matches plans that push it (MeshrollMachines).
	Machine string
	// AnyMachine matches plans that push any of these machines: those a
	// label selector picks (--selector).
	AnyMachine []string
	State      meshapi.PlanStatus
	// Limit bounds how many plans List returns; 0 means no bound.
	Limit int
	// Running keeps the list to plans whose workflow still runs: those an
	// unfreeze tells to check their hold again.
	Running bool
}

// Validate checks every filter value before it goes into a query. The
// values are validated, not only escaped, because a value that cannot be a
// module, commit, machine or state can never match, and refusing it is the
// helpful answer; it also keeps anything that could change the query's
// meaning out of it.
func (f ListFilter) Validate() error {
	if f.Module != "" {
		if err := mesh.ValidName("module", f.Module); err != nil {
			return err
		}
	}
	if f.Commit != "" {
		if err := mesh.ValidCommit(f.Commit); err != nil {
			return err
		}
	}
	if f.Machine != "" {
		if err := mesh.ValidName("machine", f.Machine); err != nil {
			return err
		}
	}
	for _, m := range f.AnyMachine {
		if err := mesh.ValidName("machine", m); err != nil {
			return err
		}
	}
	if f.State != "" && !slices.Contains(PlanStates, f.State) {
		return fmt.Errorf("plan state %q is not one of %s", f.State, StateNames())
	}
	if f.Limit < 0 {
		return fmt.Errorf("limit %d is negative", f.Limit)
	}
	return nil
}

// Query is the visibility query for f: plan workflows, narrowed by each
// filter that is set. It validates f first and escapes every value anyway.
func Query(f ListFilter) (string, error) {
	if err := f.Validate(); err != nil {
		return "", err
	}
	terms := []string{"WorkflowType = " + quote(meshapi.PlanWorkflowType)}
	add := func(key, value string) {
		if value != "" {
			terms = append(terms, key+" = "+quote(value))
		}
	}
	add("TaskQueue", f.TaskQueue)
	add(meshapi.SAModule.GetName(), f.Module)
	add(meshapi.SACommit.GetName(), f.Commit)
	// On a KeywordList, = means "contains".
	add(meshapi.SAMachines.GetName(), f.Machine)
	if len(f.AnyMachine) > 0 {
		// On a KeywordList, IN means "contains any of".
		quoted := make([]string, len(f.AnyMachine))
		for i, m := range f.AnyMachine {
			quoted[i] = quote(m)
		}
		terms = append(terms, meshapi.SAMachines.GetName()+" IN ("+strings.Join(quoted, ", ")+")")
	}
	add(meshapi.SAState.GetName(), string(f.State))
	if f.Running {
		terms = append(terms, "ExecutionStatus = 'Running'")
	}
	return strings.Join(terms, " AND "), nil
}

// quote makes s a single-quoted string literal of the visibility query
// language (SQL-like: a backslash escapes the next character).
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// Summary is one plan as the visibility store knows it: enough to list
// plans without querying each one.
type Summary struct {
	Plan   string `json:"plan"`
	RunID  string `json:"run_id"`
	Module string `json:"module"`
	Commit string `json:"commit"`
	// State is the MeshrollState search attribute, or Status when the plan
	// carries none (started before the attribute existed).
	State string `json:"state"`
	// Status is the workflow's execution status: running, completed,
	// failed, terminated, ...
	Status   string     `json:"status"`
	Started  time.Time  `json:"started"`
	Closed   *time.Time `json:"closed"`
	Machines []string   `json:"machines"`
}

// listPageSize bounds one ListWorkflow page.
const listPageSize = 100

// List returns the plans f selects, newest first as the server orders them,
// at most f.Limit of them.
func List(ctx context.Context, c client.Client, namespace string, f ListFilter) ([]Summary, error) {
	q, err := Query(f)
	if err != nil {
		return nil, err
	}
	out := []Summary{}
	var token []byte
	for {
		size := listPageSize
		if f.Limit > 0 && f.Limit-len(out) < size {
			size = f.Limit - len(out)
		}
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, PageSize: int32(size), NextPageToken: token, Query: q,
		})
		if err != nil {
			return nil, listError(namespace, q, err)
		}
		for _, info := range resp.GetExecutions() {
			out = append(out, summarize(info))
			if f.Limit > 0 && len(out) == f.Limit {
				return out, nil
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

// listError words the server's refusal of a query that names a search
// attribute it does not know: that is a namespace set-up problem, not a
// bad command line.
func listError(namespace, q string, err error) error {
	var inv *serviceerror.InvalidArgument
	if errors.As(err, &inv) {
		msg := inv.Error()
		unknown := strings.Contains(msg, "search attribute") || strings.Contains(msg, "not defined")
		for _, name := range slices.Sorted(maps.Keys(meshapi.SearchAttributeTypes)) {
			if unknown && strings.Contains(msg, name) {
				return fmt.Errorf("%w on namespace %s: the server refused %s (%w); the worker registers them when it starts, or run: temporal operator search-attribute create --namespace %s --name %s --type %s",
					ErrSearchAttributes, namespace, name, err, namespace, name, meshapi.SearchAttributeTypes[name])
			}
		}
	}
	return fmt.Errorf("list plans (query %s): %w", q, err)
}

// Describe is one plan's Summary, read directly rather than from the
// visibility store, so it is current the moment the plan starts.
func Describe(ctx context.Context, c client.Client, id string) (Summary, error) {
	desc, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return Summary{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return Summary{}, fmt.Errorf("describe plan %s: %w", id, err)
	}
	return summarize(desc.RawResponse.GetWorkflowExecutionInfo()), nil
}

// summarize reads a plan's execution info. Module and commit come from the
// search attributes when the plan has them, else from its ID, so that plans
// started before the attributes existed still list sensibly.
func summarize(info *workflowpb.WorkflowExecutionInfo) Summary {
	fields := info.GetSearchAttributes().GetIndexedFields()
	s := Summary{
		Plan:     info.GetExecution().GetWorkflowId(),
		RunID:    info.GetExecution().GetRunId(),
		Module:   keyword(fields, meshapi.SAModule.GetName()),
		Commit:   keyword(fields, meshapi.SACommit.GetName()),
		State:    keyword(fields, meshapi.SAState.GetName()),
		Status:   Status(info.GetStatus()),
		Machines: keywordList(fields, meshapi.SAMachines.GetName()),
	}
	if s.Module == "" || s.Commit == "" {
		if m, c, ok := meshapi.ParsePlanID(s.Plan); ok {
			s.Module = orElse(s.Module, m)
			s.Commit = orElse(s.Commit, c)
		}
	}
	if s.State == "" {
		s.State = s.Status
	}
	if t := info.GetStartTime(); t != nil {
		s.Started = t.AsTime()
	}
	if t := info.GetCloseTime(); t != nil && info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		ct := t.AsTime()
		s.Closed = &ct
	}
	return s
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// keyword decodes a Keyword search attribute; a missing or undecodable one
// is "": a listing should not fail for one odd plan.
func keyword(fields map[string]*commonpb.Payload, name string) string {
	var s string
	if p := fields[name]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
			return ""
		}
	}
	return s
}

// keywordList decodes a KeywordList search attribute, never nil.
func keywordList(fields map[string]*commonpb.Payload, name string) []string {
	var l []string
	if p := fields[name]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &l); err != nil {
			l = nil
		}
	}
	if l == nil {
		l = []string{}
	}
	return l
}

// Status names a workflow execution status the way the rest of meshroll's
// output names states: lowercase, words joined by '_' (running, completed,
// continued_as_new, timed_out, ...).
func Status(st enumspb.WorkflowExecutionStatus) string {
	name := st.String() // PascalCase: "ContinuedAsNew"
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
