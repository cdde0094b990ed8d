package machines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// dead is a host URL nothing listens on.
const dead = "http://127.0.0.1:1"

var errTemporal = errors.New("temporal unreachable at test")

func noTemporal(context.Context) (client.Client, error) { return nil, errTemporal }

// temporal answers machine workflow queries from states, and lists every
// machine of states as a running workflow whose memo holds its summary
// (none for the machines in unpublished); a machine not in states has no
// workflow. It lists for the mesh on queue; listErr fails the list;
// queried records the queries asked.
type temporal struct {
	client.Client
	queue       string
	states      map[string]meshapi.MachineState
	unpublished map[string]bool
	listErr     error
	queried     *asked
}

// asked records the workflow IDs queried, from any goroutine.
type asked struct {
	mu  sync.Mutex
	ids []string
}

func (t temporal) dial(context.Context) (client.Client, error) { return t, nil }

func (temporal) Close() {}

func (t temporal) QueryWorkflow(_ context.Context, id, _, _ string, _ ...any) (converter.EncodedValue, error) {
	if t.queried != nil {
		t.queried.mu.Lock()
		t.queried.ids = append(t.queried.ids, id)
		t.queried.mu.Unlock()
	}
	for name, st := range t.states {
		if meshapi.MachineID(name) == id {
			return value{st}, nil
		}
	}
	return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
}

func (t temporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if t.listErr != nil {
		return nil, t.listErr
	}
	if want := "WorkflowType = 'Machine' AND ExecutionStatus = 'Running' AND TaskQueue = '" + t.queue + "'"; req.GetQuery() != want {
		return nil, fmt.Errorf("query %q, want %q", req.GetQuery(), want)
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for name, st := range t.states {
		info := &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: meshapi.MachineID(name)}}
		if !t.unpublished[name] {
			p, err := converter.GetDefaultDataConverter().ToPayload(st.Summary())
			if err != nil {
				return nil, err
			}
			info.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{meshapi.MemoMachine: p}}
		}
		resp.Executions = append(resp.Executions, info)
	}
	return resp, nil
}

type value struct{ v any }

func (v value) HasValue() bool { return true }

func (v value) Get(ptr any) error {
	b, err := json.Marshal(v.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

// fakeHost serves rep, and a journal of entries newest first (indexes
// entries down to 1) paged as an agent pages it; journal requests are
// recorded as their query strings.
func fakeHost(t *testing.T, rep mesh.Report, entries int) (string, *[]string) {
	t.Helper()
	var asked []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+host.PathReport, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, rep) })
	mux.HandleFunc("GET "+host.PathJournal, func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RawQuery)
		top := uint64(entries)
		if b := r.URL.Query().Get("before"); b != "" {
			n, _ := strconv.ParseUint(b, 10, 64)
			top = n - 1
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		page := host.JournalPage{Machine: rep.Machine, Entries: []host.JournalEntry{}}
		for i := top; i > 0 && len(page.Entries) < limit; i-- {
			page.Entries = append(page.Entries, host.JournalEntry{Index: i, Outcome: "applied", Seq: i,
				Containers: []mesh.Container{{Module: "host", Digest: "sha256:x", Generation: int64(i), Env: map[string]string{"K": "v"}}}})
		}
		if n := len(page.Entries); n > 0 && page.Entries[n-1].Index > 1 {
			page.NextBefore = page.Entries[n-1].Index
		}
		writeJSON(w, page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, &asked
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func TestListWithoutTemporal(t *testing.T) {
	ok, _ := fakeHost(t, mesh.Report{Machine: "edge-1", LastSeq: 7}, 0)
	cfg := &config.Config{Machines: map[string]config.Machine{
		"control-node": {Host: dead, Tier: 2, Modules: []string{"host"}},
		"edge-1":       {Host: ok, Tier: 1},
		"edge-2":       {Host: ok, Tier: 1, CAFile: filepath.Join(t.TempDir(), "missing.pem")},
	}}
	rows, err := List(context.Background(), cfg, Sources{Dial: noTemporal})
	require.ErrorIs(t, err, errTemporal)
	require.Len(t, rows, 3)
	for _, r := range rows {
		assert.Equal(t, errTemporal.Error(), r.WorkflowError, r.Machine)
		assert.Nil(t, r.LastSeq, r.Machine)
	}
	assert.Equal(t, "control-node", rows[0].Machine)
	assert.Equal(t, HostUnreachable, rows[0].HostStatus)
	assert.Nil(t, rows[0].HostSeq)
	assert.Equal(t, HostOK, rows[1].HostStatus)
	assert.Equal(t, []string{}, rows[1].Modules, "[] rather than null")
	require.NotNil(t, rows[1].HostSeq)
	assert.EqualValues(t, 7, *rows[1].HostSeq)
	assert.Equal(t, HostError, rows[2].HostStatus, "a bad ca_file is not an unreachable host")
	assert.Contains(t, rows[2].HostError, "host "+ok+": host CA file: ")
}

// TestListReadsMachineWorkflows: an overview of more than one machine
// reads the machine workflows from one visibility list, asking directly
// only one machine alone, a workflow that published no summary, or all
// of them when the list fails.
func TestListReadsMachineWorkflows(t *testing.T) {
	ok, _ := fakeHost(t, mesh.Report{LastSeq: 3}, 0)
	cur := &meshapi.QueuedRequest{Request: "r", Plan: "p"}
	states := map[string]meshapi.MachineState{
		"edge-1": {Machine: "edge-1", LastSeq: 3, Current: cur, Queue: []meshapi.QueuedRequest{{Plan: "q"}, {Plan: "back", Rollback: true}}},
		"edge-3": {Machine: "edge-3", LastSeq: 9, Queue: []meshapi.QueuedRequest{}},
	}
	for _, tc := range []struct {
		name        string
		machines    []string
		unpublished map[string]bool
		listErr     error
		queried     []string
	}{
		{name: "fleet from the list", machines: []string{"edge-1", "edge-2", "edge-3"}},
		{name: "one machine asked", machines: []string{"edge-1"}, queried: []string{"edge-1"}},
		{name: "unpublished asked", machines: []string{"edge-1", "edge-2", "edge-3"}, unpublished: map[string]bool{"edge-3": true}, queried: []string{"edge-3"}},
		{name: "list failed", machines: []string{"edge-1", "edge-2", "edge-3"}, listErr: errors.New("visibility down"), queried: []string{"edge-1", "edge-2", "edge-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Temporal: config.Temporal{TaskQueue: "mesh-a"}, Machines: map[string]config.Machine{}}
			for _, m := range tc.machines {
				cfg.Machines[m] = config.Machine{Host: ok}
			}
			queried := &asked{}
			fake := temporal{queue: "mesh-a", states: states, unpublished: tc.unpublished, listErr: tc.listErr, queried: queried}
			rows, err := List(context.Background(), cfg, Sources{Dial: fake.dial})
			require.NoError(t, err)
			want := make([]string, len(tc.queried))
			for i, m := range tc.queried {
				want[i] = meshapi.MachineID(m)
			}
			assert.ElementsMatch(t, want, queried.ids, "machine workflows asked directly")
			require.NotNil(t, rows[0].LastSeq)
			assert.EqualValues(t, 3, *rows[0].LastSeq)
			assert.Equal(t, 2, *rows[0].Queue)
			assert.Equal(t, 1, rows[0].Rollbacks)
			assert.Equal(t, cur, rows[0].Current)
			if len(rows) == 1 {
				return
			}
			assert.Nil(t, rows[1].LastSeq, "no workflow yet")
			assert.Empty(t, rows[1].WorkflowError, "no workflow yet is not an error")
			require.NotNil(t, rows[2].LastSeq)
			assert.EqualValues(t, 9, *rows[2].LastSeq)
			assert.Nil(t, rows[2].Current)
		})
	}
}

// TestListDoesNotAskAFleetOneByOne: when the list fails, a fleet larger
// than AskOneByOne is not asked a query per machine (a storm on a server
// that just failed one list); each row says why its workflow is unread.
func TestListDoesNotAskAFleetOneByOne(t *testing.T) {
	ok, _ := fakeHost(t, mesh.Report{LastSeq: 3}, 0)
	for _, n := range []int{AskOneByOne, AskOneByOne + 1} {
		cfg := &config.Config{Machines: map[string]config.Machine{}}
		for i := range n {
			cfg.Machines[fmt.Sprintf("edge-%03d", i)] = config.Machine{Host: ok}
		}
		queried := &asked{}
		fake := temporal{states: map[string]meshapi.MachineState{"edge-000": {Machine: "edge-000", LastSeq: 3}}, listErr: errors.New("visibility down"), queried: queried}
		rows, err := List(context.Background(), cfg, Sources{Dial: fake.dial})
		require.NoError(t, err)
		require.Len(t, rows, n)
		if n <= AskOneByOne {
			assert.Len(t, queried.ids, n, "%d machines: each asked once the list failed", n)
			require.NotNil(t, rows[0].LastSeq, "%d machines: edge-000 read by its query", n)
			continue
		}
		assert.Empty(t, queried.ids, "%d machines: none asked one by one", n)
		for _, r := range rows {
			assert.Nil(t, r.LastSeq, r.Machine)
			assert.Contains(t, r.WorkflowError, "visibility down", r.Machine)
			assert.Contains(t, r.WorkflowError, "not asked one by one", r.Machine)
		}
	}
}

func TestShowPagesTheJournal(t *testing.T) {
	url, asked := fakeHost(t, mesh.Report{Machine: "edge-1", LastSeq: 250}, 250)
	m := config.Machine{Host: url}
	d, err := Show(context.Background(), temporal{}.dial, "edge-1", m, 150)
	require.NoError(t, err)
	require.Len(t, d.Journal, 150)
	assert.EqualValues(t, 250, d.Journal[0].Index, "newest first")
	assert.EqualValues(t, 101, d.Journal[149].Index)
	assert.Equal(t, []JournalContainer{{Module: "host", Digest: "sha256:x", Generation: 101}}, d.Journal[149].Containers)
	assert.Equal(t, []string{"limit=100", "before=151&limit=50"}, *asked)
	assert.Nil(t, d.Workflow, "no workflow yet")

	// Asking for more than there is stops at the oldest entry.
	*asked = nil
	d, err = Show(context.Background(), temporal{}.dial, "edge-1", m, 300)
	require.NoError(t, err)
	assert.Len(t, d.Journal, 250)
	assert.Len(t, *asked, 3)

	// --journal 0 does not ask.
	*asked = nil
	d, err = Show(context.Background(), temporal{}.dial, "edge-1", m, 0)
	require.NoError(t, err)
	assert.Equal(t, []JournalEntry{}, d.Journal)
	assert.Empty(t, *asked)
}

func TestShowSaysEachPartOnce(t *testing.T) {
	d, err := Show(context.Background(), noTemporal, "edge-1", config.Machine{Host: dead, Modules: []string{"host"}}, 5)
	require.Error(t, err)
	assert.ErrorIs(t, err, errTemporal)
	assert.True(t, host.IsUnreachable(err))
	assert.Regexp(t, `^machine edge-1: host `+dead+` unreachable: .+; `+errTemporal.Error()+`$`, err.Error(),
		"the journal failing the way the report did is not said twice")
	assert.Contains(t, d.HostError, "host "+dead+" unreachable: ")
	assert.Contains(t, d.JournalError, "journal: host "+dead+" unreachable: ")
	assert.Equal(t, errTemporal.Error(), d.WorkflowError)
	assert.Nil(t, d.Seq)
	assert.Equal(t, []Container{}, d.Containers)
	assert.Equal(t, []JournalEntry{}, d.Journal)
}

func TestShowReadsTheWorkflow(t *testing.T) {
	url, _ := fakeHost(t, mesh.Report{Machine: "edge-2", LastSeq: 4, Containers: []mesh.RunningContainer{
		{Module: "host", Digest: "sha256:x", Generation: 2, Plan: "p", Seq: 4, State: mesh.StateRunning, Env: map[string]string{"SECRET": "x"},
			Introduced: &mesh.Introduction{Plan: "p0", Seq: 1}},
		{Module: "metrics", Digest: "sha256:m", Generation: 9, Plan: "p", Seq: 4, State: mesh.StateRunning},
	}}, 0)
	tc := temporal{states: map[string]meshapi.MachineState{"edge-1": {LastSeq: 4, Queue: []meshapi.QueuedRequest{},
		Floor: map[string]mesh.Container{
			"metrics": {Module: "metrics", Digest: "sha256:m", Generation: 9, Commit: "c9"},
			"host":    {Module: "host", Digest: "sha256:x", Generation: 2},
		},
		HostLostState: "host edge-1 reported last sequence 0, below the 4 ...",
	}}}
	d, err := Show(context.Background(), tc.dial, "edge-1", config.Machine{Host: url}, 0)
	require.NoError(t, err)
	assert.Equal(t, "edge-2", d.ReportedMachine, "the config points at another machine's host")
	assert.Equal(t, []Container{
		{Module: "host", Digest: "sha256:x", Generation: 2, Plan: "p", Seq: 4, Introduced: &mesh.Introduction{Plan: "p0", Seq: 1}, State: mesh.StateRunning},
		{Module: "metrics", Digest: "sha256:m", Generation: 9, Plan: "p", Seq: 4, State: mesh.StateRunning},
	}, d.Containers, "each container's introduction as the host says it, none where it does not")
	assert.Equal(t, "p", d.LastPlan, "the last declaration, once")
	assert.Equal(t, &Workflow{ID: "machine/edge-1", LastSeq: 4, Queue: []meshapi.QueuedRequest{},
		Floor:         []Floor{{Module: "host", Generation: 2, Digest: "sha256:x"}, {Module: "metrics", Generation: 9, Digest: "sha256:m", Commit: "c9"}},
		HostLostState: "host edge-1 reported last sequence 0, below the 4 ...",
	}, d.Workflow, "the floor is listed by module")
}

func TestHostProblem(t *testing.T) {
	u := &host.UnreachableError{URL: "http://h", Err: errors.New("connection refused")}
	assert.Equal(t, "host http://h unreachable: connection refused", hostProblem("m", config.Machine{Host: "http://other"}, fmt.Errorf("report: %w", u)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	assert.Equal(t, "host http://h unreachable: context deadline exceeded", hostProblem("m", config.Machine{Host: "http://h"}, ctx.Err()))
	assert.Equal(t, "host http://h: refused report: invalid: no", hostProblem("m", config.Machine{Host: "http://h"},
		&host.RefusedError{URL: "http://h", Op: "report", Status: http.StatusBadRequest, Code: "invalid", Message: "no"}))
}

// A host that turns the token away is "unauthorized", and the words name
// the setting that gives the machine its token: the config key and the
// variable, whether the token is wrong or missing, in list and show alike.
func TestHostTurnsTheTokenAway(t *testing.T) {
	agent := httptest.NewServer(host.NewHandler(nil, "right"))
	t.Cleanup(agent.Close)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	t.Cleanup(proxy.Close)
	cfg := &config.Config{Machines: map[string]config.Machine{
		"edge-1":       {Host: agent.URL, Token: "wrong"},
		"edge-2":       {Host: agent.URL},
		"control-node": {Host: proxy.URL, Token: "right"},
	}}
	rows, err := List(context.Background(), cfg, Sources{Dial: temporal{}.dial})
	require.NoError(t, err)
	want := map[string]string{
		"control-node": "host " + proxy.URL + " answered 403 Forbidden: it refuses machine control-node's token; set MESHROLL_MACHINES_CONTROL_NODE_TOKEN (or machines.control-node.token in the mesh config) to the host agent's own token (its --token-file, or MESHROLL_HOST_TOKEN)",
		"edge-1":       "host " + agent.URL + " answered 401 Unauthorized: it refuses machine edge-1's token; set MESHROLL_MACHINES_EDGE_1_TOKEN (or machines.edge-1.token in the mesh config) to the host agent's own token (its --token-file, or MESHROLL_HOST_TOKEN)",
		"edge-2":       "host " + agent.URL + " answered 401 Unauthorized: machine edge-2 has no token; set MESHROLL_MACHINES_EDGE_2_TOKEN (or machines.edge-2.token in the mesh config) to the host agent's own token (its --token-file, or MESHROLL_HOST_TOKEN)",
	}
	require.Len(t, rows, 3)
	for _, r := range rows {
		assert.Equal(t, HostUnauthorized, r.HostStatus, r.Machine)
		assert.Equal(t, want[r.Machine], r.HostError, r.Machine)
	}

	d, err := Show(context.Background(), temporal{}.dial, "edge-1", cfg.Machines["edge-1"], 5)
	require.Error(t, err)
	assert.Equal(t, want["edge-1"], d.HostError)
	assert.Equal(t, "machine edge-1: "+want["edge-1"], err.Error(), "said once, not again for the journal")
}

// machine show against a real host agent: each container names the plan
// that brought its build, not the last plan that declared the machine,
// which is said once.
func TestShowNamesThePlanThatIntroducedEachContainer(t *testing.T) {
	ctx := context.Background()
	a, err := agent.Open(ctx, agent.Options{Machine: "control-node", StateDir: t.TempDir(), Runtime: agent.NewNoopRuntime(0), Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	srv := httptest.NewServer(agent.NewHandler(a, ""))
	t.Cleanup(srv.Close)

	digest := func(n int) string { return fmt.Sprintf("sha256:%064x", n) }
	metricsPlan := meshapi.PlanID("metrics", strings.Repeat("1", 40))
	hostPlan := meshapi.PlanID("host", strings.Repeat("2", 40))
	metrics := mesh.Container{Module: "metrics", Digest: digest(1), Generation: 25}
	for i, d := range []mesh.Declaration{
		{Seq: 1, Plan: metricsPlan, Containers: []mesh.Container{metrics}},
		{Seq: 2, Plan: hostPlan, Containers: []mesh.Container{{Module: "host", Digest: digest(2), Generation: 26}, metrics}},
	} {
		d.Machine, d.Request = "control-node", fmt.Sprintf("r%d", i)
		_, err := a.Apply(ctx, d)
		require.NoError(t, err)
	}

	d, err := Show(ctx, temporal{}.dial, "control-node", config.Machine{Host: srv.URL}, 0)
	require.NoError(t, err)
	require.Len(t, d.Containers, 2)
	byModule := map[string]Container{}
	for _, c := range d.Containers {
		byModule[c.Module] = c
	}
	assert.Equal(t, &mesh.Introduction{Plan: metricsPlan, Seq: 1}, byModule["metrics"].Introduced, "kept by the host plan, brought by its own")
	assert.Equal(t, &mesh.Introduction{Plan: hostPlan, Seq: 2}, byModule["host"].Introduced)
	assert.Equal(t, hostPlan, d.LastPlan)
}
