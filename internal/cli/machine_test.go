package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

var (
	digestA = "sha256:" + strings.Repeat("a", 64)
	digestB = "sha256:" + strings.Repeat("b", 64)
)

// fakeHost answers the host API's report and journal with fixed values.
func fakeHost(t *testing.T, rep mesh.Report, page host.JournalPage) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case host.PathReport:
			_ = json.NewEncoder(w).Encode(rep)
		case host.PathJournal:
			_ = json.NewEncoder(w).Encode(page)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// configWithHosts is a mesh config with Temporal unreachable and the
// machines at the given host URLs.
func configWithHosts(t *testing.T, controlNode, edge1 string) string {
	t.Helper()
	return unreachableMesh(t, fmt.Sprintf(`  control-node: {host: %q, tier: 2, modules: [mesh-controller, host]}
  edge-1:       {host: %q, tier: 1, modules: [host]}
`, controlNode, edge1))
}

// unreachableMesh writes a mesh config with Temporal unreachable, modules
// mesh-controller and host, and rest after "machines:" (the machines'
// lines, and any section after them).
func unreachableMesh(t *testing.T, rest string) string {
	t.Helper()
	y := fmt.Sprintf(`temporal: {address: %s, namespace: default, task_queue: meshroll}
modules:
  mesh-controller: {repo: ., path: examples/controller, control_plane: true}
  host:            {repo: ., path: examples/host}
machines:
%s`, unreachable, rest)
	p := filepath.Join(t.TempDir(), "mesh.yaml")
	require.NoError(t, os.WriteFile(p, []byte(y), 0o600))
	return p
}

func TestMachineShowUnknownMachineNeverDials(t *testing.T) {
	cfg := writeConfig(t)
	r := run(t, "--config", cfg, "machine", "show", "edge-9")
	require.Error(t, r.err)
	assert.Equal(t, `unknown machine "edge-9" (known: control-node, edge-1); add it to machines: in `+cfg, r.err.Error())
	assert.Equal(t, ExitUsage, ExitCode(r.err))
	assert.Empty(t, r.stdout)

	for _, args := range [][]string{{"machine", "show"}, {"machine", "show", "a", "b"}} {
		r = run(t, append([]string{"--config", cfg}, args...)...)
		require.Error(t, r.err)
		assert.Contains(t, r.err.Error(), "takes one machine name")
		assert.Equal(t, ExitUsage, ExitCode(r.err))
	}
	r = run(t, "--config", cfg, "machine", "show", "edge-1", "--journal", "-1")
	require.Error(t, r.err)
	assert.Equal(t, ExitUsage, ExitCode(r.err))
}

func TestPlanListRejectsBadFiltersBeforeDialing(t *testing.T) {
	cfg := writeConfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--module", "x' OR 1=1"}, `module name "x' OR 1=1" must be`},
		{[]string{"--module", "host' OR MeshrollModule = 'mesh-controller"}, "module name"},
		{[]string{"--machine", "edge-1') OR ('1'='1"}, "machine name"},
		{[]string{"--commit", "abc"}, "not a full commit id"},
		{[]string{"--commit", commit + "' OR 1=1"}, "not a full commit id"},
		{[]string{"--state", "bogus"}, `plan state "bogus" is not one of building, composing, pushing`},
		{[]string{"--limit", "0"}, "--limit 0: want at least 1"},
	} {
		r := run(t, append([]string{"--config", cfg, "plan", "list"}, tc.args...)...)
		require.Error(t, r.err, tc.args)
		assert.Contains(t, r.err.Error(), tc.want, tc.args)
		assert.NotContains(t, r.err.Error(), "temporal", "refused before dialing: %v", tc.args)
		assert.Equal(t, ExitUsage, ExitCode(r.err), tc.args)
		assert.Empty(t, r.stdout)
	}
}

func TestWritePlanList(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writePlanList(&b, []plans.Summary{}))
	assert.Equal(t, "no plans match\n", b.String())

	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.Local)
	closed := start.Add(90 * time.Second)
	b.Reset()
	require.NoError(t, writePlanList(&b, []plans.Summary{
		{Plan: meshapi.PlanID("host", commit), Module: "host", Commit: commit, State: "pushing", Status: "running", Started: start},
		{Plan: meshapi.PlanID("mesh-controller", commit), Module: "mesh-controller", Commit: commit, State: "halted", Status: "completed", Started: start, Closed: &closed},
	}))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^PLAN\s+MODULE\s+COMMIT\s+STATE\s+STARTED\s+CLOSED$`, lines[0])
	assert.Regexp(t, `^plan/host/`+commit+`\s+host\s+0123456789ab\s+pushing\s+2025-01-02 03:04:05\s+-$`, lines[1])
	assert.Regexp(t, `^plan/mesh-controller/`+commit+`\s+mesh-controller\s+0123456789ab\s+halted\s+2025-01-02 03:04:05\s+2025-01-02 03:05:35$`, lines[2])
}

func TestFormatElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                     "0.0s",
		-time.Second:                          "0.0s",
		12345 * time.Millisecond:              "12.3s",
		59990 * time.Millisecond:              "59.9s",
		time.Minute:                           "1m00.0s",
		2*time.Minute + 3400*time.Millisecond: "2m03.4s",
		time.Hour + 2*time.Minute + 3*time.Second: "1h02m03.0s",
	} {
		assert.Equal(t, want, formatElapsed(d), d.String())
	}
}

func TestPlanClock(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now := start.Add(time.Hour)
	clock := func() time.Time { return now }
	assert.Equal(t, time.Hour, planClock(plans.Summary{Started: start}, clock)())
	closed := start.Add(42 * time.Second)
	assert.Equal(t, 42*time.Second, planClock(plans.Summary{Started: start, Closed: &closed}, clock)(), "an ended plan shows how long it took")
	c := planClock(plans.Summary{}, clock)
	now = now.Add(3 * time.Second)
	assert.Equal(t, 3*time.Second, c(), "no start time: timed from the first call")
}

// With Temporal unreachable, machine show still shows what the host says,
// says Temporal was unreachable, and exits 1.
func TestMachineShowHostPartWithoutTemporal(t *testing.T) {
	plan := meshapi.PlanID("host", commit)
	url := fakeHost(t, mesh.Report{Machine: "edge-1", LastSeq: 4, Containers: []mesh.RunningContainer{
		{Module: "host", Digest: digestA, Generation: 3, Plan: plan, Seq: 4, State: mesh.StateRunning, Since: "2025-01-02T03:04:05Z", Env: map[string]string{"SECRET": "x"}},
	}}, host.JournalPage{Machine: "edge-1", Entries: []host.JournalEntry{
		{Index: 9, Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Outcome: "running", Seq: 4, Plan: plan,
			Containers: []mesh.Container{{Module: "host", Digest: digestA, Generation: 3}}},
		{Index: 8, Time: time.Date(2025, 1, 2, 3, 4, 4, 0, time.UTC), Outcome: "applied", Seq: 4, Plan: plan, Request: plan + "@edge-1", Force: true,
			Containers: []mesh.Container{{Module: "host", Digest: digestA, Generation: 3}}},
	}})
	cfg := unreachableMesh(t, fmt.Sprintf(`  control-node: {host: "http://127.0.0.1:1", tier: 2, modules: [mesh-controller, host]}
  edge-1:       {host: %q, tier: 1, modules: [host], labels: {site: fra1, ring: canary}}
`, url))

	r := run(t, "--config", cfg, "machine", "show", "edge-1", "--output", "json")
	require.Error(t, r.err)
	assert.Equal(t, ExitError, ExitCode(r.err))
	assert.Contains(t, r.err.Error(), "temporal unreachable at "+unreachable)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	assert.Equal(t, "edge-1", v["machine"])
	assert.Equal(t, url, v["host"])
	assert.EqualValues(t, 4, v["seq"])
	assert.Equal(t, map[string]any{"site": "fra1", "ring": "canary"}, v["labels"])
	assert.Nil(t, v["workflow"])
	assert.Contains(t, v["workflow_error"], "temporal unreachable")
	cs := v["containers"].([]any)
	require.Len(t, cs, 1)
	assert.Equal(t, map[string]any{"module": "host", "digest": digestA, "generation": 3.0, "plan": plan, "seq": 4.0,
		"state": "running", "since": "2025-01-02T03:04:05Z"}, cs[0], "no settings (env) in the output")
	js := v["journal"].([]any)
	require.Len(t, js, 2)
	e := js[1].(map[string]any)
	assert.EqualValues(t, 8, e["index"])
	assert.Equal(t, "applied", e["outcome"])
	assert.EqualValues(t, 4, e["seq"])
	assert.Equal(t, plan, e["plan"])
	assert.Equal(t, true, e["force"])
	assert.Equal(t, []any{map[string]any{"module": "host", "digest": digestA, "generation": 3.0}}, e["containers"])

	r = run(t, "--config", cfg, "machine", "show", "edge-1", "--journal", "1")
	require.Error(t, r.err)
	assert.Contains(t, r.stdout, "host reports last seq 4")
	assert.Contains(t, r.stdout, "\nlabels ring=canary,site=fra1\n")
	assert.Regexp(t, `host\s+sha256:aaaaaaaaaaaa\s+3\s+`+plan+`\s+4\s+running`, r.stdout)
	assert.Contains(t, r.stdout, "workflow machine/edge-1: temporal unreachable at "+unreachable)
	assert.Contains(t, r.stdout, "journal (latest 1, newest first):")
	assert.Regexp(t, `9\s+\S+ \S+\s+running\s+4\s+`+plan+`\s+host=sha256:aaaaaaaaaaaa\s+-`, r.stdout)
}

// A dead host: machine show says "host <url> unreachable" and exits 1.
func TestMachineShowHostUnreachable(t *testing.T) {
	cfg := configWithHosts(t, "http://127.0.0.1:1", "http://127.0.0.1:1")
	r := run(t, "--config", cfg, "machine", "show", "control-node", "--output", "json")
	require.Error(t, r.err)
	assert.Equal(t, ExitError, ExitCode(r.err))
	assert.Contains(t, r.err.Error(), "machine control-node: host http://127.0.0.1:1 unreachable: ")
	assert.NotContains(t, r.err.Error(), "journal", "the journal failing the same way is not said twice")
	var v machines.Detail
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	assert.Nil(t, v.Seq)
	assert.Equal(t, []machines.Container{}, v.Containers)
	assert.Equal(t, []machines.JournalEntry{}, v.Journal)
	assert.Contains(t, v.HostError, "host http://127.0.0.1:1 unreachable")
}

func TestMachineList(t *testing.T) {
	url := fakeHost(t, mesh.Report{Machine: "edge-1", LastSeq: 7}, host.JournalPage{})
	cfg := configWithHosts(t, "http://127.0.0.1:1", url)
	r := run(t, "--config", cfg, "machine", "list", "--output", "json")
	require.Error(t, r.err, "Temporal is unreachable")
	assert.Contains(t, r.err.Error(), "temporal unreachable")
	var rows []machines.Row
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows), r.stdout)
	require.Len(t, rows, 2)
	assert.Equal(t, "control-node", rows[0].Machine)
	assert.Equal(t, []string{"mesh-controller", "host"}, rows[0].Modules)
	assert.Equal(t, machines.HostUnreachable, rows[0].HostStatus)
	assert.Nil(t, rows[0].HostSeq)
	assert.Equal(t, "edge-1", rows[1].Machine)
	assert.Equal(t, machines.HostOK, rows[1].HostStatus)
	require.NotNil(t, rows[1].HostSeq)
	assert.EqualValues(t, 7, *rows[1].HostSeq)
	assert.Nil(t, rows[1].LastSeq)

	r = run(t, "--config", cfg, "machine", "list")
	require.Error(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4, r.stdout)
	assert.Regexp(t, `^MACHINE\s+TIER\s+MODULES\s+HOST\s+LAST SEQ\s+QUEUE\s+HOST STATUS$`, lines[0])
	assert.Regexp(t, `^control-node\s+2\s+mesh-controller,host\s+http://127.0.0.1:1\s+\?\s+\?\s+unreachable$`, lines[1])
	assert.Regexp(t, `^edge-1\s+1\s+host\s+`+url+`\s+\?\s+\?\s+ok$`, lines[2])
	assert.Regexp(t, `^control-node: host http://127.0.0.1:1: unreachable: `, lines[3], "why, below the table")
}

// A host that refuses the machine's token is "unauthorized", and the line
// below the table names the variable (and key) that sets it.
func TestMachineListNamesTheTokenSetting(t *testing.T) {
	agent := httptest.NewServer(host.NewHandler(nil, "the-agents-token"))
	t.Cleanup(agent.Close)
	cfg := configWithHosts(t, agent.URL, agent.URL)
	t.Setenv("MESHROLL_MACHINES_EDGE_1_TOKEN", "a-wrong-one")
	r := run(t, "--config", cfg, "machine", "list")
	require.Error(t, r.err, "Temporal is unreachable")
	assert.Regexp(t, `(?m)^edge-1\s+1\s+host\s+\S+\s+\?\s+\?\s+unauthorized$`, r.stdout)
	assert.Regexp(t, `(?m)^control-node\s+2\s+\S+\s+\S+\s+\?\s+\?\s+unauthorized$`, r.stdout)
	assert.Contains(t, r.stdout, "edge-1: host "+agent.URL+" answered 401 Unauthorized: it refuses machine edge-1's token; set MESHROLL_MACHINES_EDGE_1_TOKEN (or machines.edge-1.token in the mesh config)")
	assert.Contains(t, r.stdout, "control-node: host "+agent.URL+" answered 401 Unauthorized: machine control-node has no token; set MESHROLL_MACHINES_CONTROL_NODE_TOKEN")
	assert.NotContains(t, r.stdout, "a-wrong-one")
}

func TestWriteMachineList(t *testing.T) {
	seq, q, zero := uint64(5), 2, 0
	var b bytes.Buffer
	require.NoError(t, writeMachineList(&b, []machines.Row{
		{Machine: "control-node", Tier: 2, Modules: []string{"mesh-controller", "host"}, Host: "http://h1", LastSeq: &seq, Queue: &q,
			Current: &meshapi.QueuedRequest{Plan: "p"}, HostStatus: machines.HostOK},
		{Machine: "edge-1", Tier: 1, Modules: []string{"host"}, Host: "http://h2", LastSeq: &seq, Queue: &zero, HostStatus: machines.HostError},
		{Machine: "edge-2", Tier: 1, Modules: []string{}, Host: "http://h3", HostStatus: machines.HostUnreachable},
	}, nil))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 4)
	assert.Regexp(t, `^control-node\s+2\s+mesh-controller,host\s+http://h1\s+5\s+2\+1\s+ok$`, lines[1])
	assert.Regexp(t, `^edge-1\s+1\s+host\s+http://h2\s+5\s+0\s+error$`, lines[2])
	assert.Regexp(t, `^edge-2\s+1\s+-\s+http://h3\s+-\s+-\s+unreachable$`, lines[3], "no workflow yet")

	// A "?" says why below the table: once when every workflow failed alike.
	b.Reset()
	listFailed := "list machine workflows: deadline exceeded; not asked one by one"
	require.NoError(t, writeMachineList(&b, []machines.Row{
		{Machine: "edge-1", Tier: 1, Host: "http://h2", HostStatus: machines.HostOK, WorkflowError: listFailed},
		{Machine: "edge-2", Tier: 1, Host: "http://h3", HostStatus: machines.HostOK, WorkflowError: listFailed},
	}, nil))
	lines = strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 4, b.String())
	assert.Regexp(t, `^edge-1\s+1\s+-\s+http://h2\s+\?\s+\?\s+ok$`, lines[1])
	assert.Equal(t, "machine workflows not asked: "+listFailed, lines[3])
}

// Each container's PLAN and SEQ are the declaration that brought its
// build; the plan that last declared the machine is said once, above.
func TestWriteMachineViewNamesWhoIntroducedEachContainer(t *testing.T) {
	seq := uint64(7)
	hostPlan, metricsPlan := meshapi.PlanID("host", commit), meshapi.PlanID("metrics", strings.Repeat("1", 40))
	v := machines.Detail{Machine: "edge-1", Host: "http://h", Tier: 1, Modules: []string{"host", "metrics"}, Seq: &seq, LastPlan: hostPlan,
		Containers: []machines.Container{
			{Module: "host", Digest: digestA, Generation: 27, Plan: hostPlan, Seq: 7, Introduced: &mesh.Introduction{Plan: hostPlan, Seq: 7}, State: "running"},
			{Module: "metrics", Digest: digestB, Generation: 25, Plan: hostPlan, Seq: 7, Introduced: &mesh.Introduction{Plan: metricsPlan, Seq: 3}, State: "running"},
		}}
	var b bytes.Buffer
	require.NoError(t, writeMachineView(&b, v))
	out := b.String()
	assert.Contains(t, out, "host reports last seq 7, declared by "+hostPlan+"\n")
	assert.Regexp(t, `(?m)^host\s+sha256:aaaaaaaaaaaa\s+27\s+`+hostPlan+`\s+7\s+running\s+-$`, out)
	assert.Regexp(t, `(?m)^metrics\s+sha256:bbbbbbbbbbbb\s+25\s+`+metricsPlan+`\s+3\s+running\s+-$`, out)
	assert.NotContains(t, out, "does not say")

	// Put back after a failed build: the plan is the one that failed.
	v.Containers[0].Introduced = &mesh.Introduction{Plan: hostPlan, Seq: 7, Revert: true}
	b.Reset()
	require.NoError(t, writeMachineView(&b, v))
	assert.Regexp(t, `(?m)^host\s+\S+\s+27\s+`+hostPlan+` \(put back after it failed\)\s+7\s`, b.String())
}

func TestWriteMachineView(t *testing.T) {
	seq := uint64(3)
	plan := meshapi.PlanID("host", commit)
	v := machines.Detail{
		Machine: "control-node", Host: "http://h", Tier: 2, Modules: []string{"mesh-controller", "host"}, Seq: &seq,
		ReportedMachine: "edge-1",
		Containers:      []machines.Container{{Module: "host", Digest: digestA, Generation: 2, Plan: plan, Seq: 3, State: "running", Since: "s"}},
		Workflow: &machines.Workflow{ID: "machine/control-node", LastSeq: 3,
			Current: &meshapi.QueuedRequest{Request: plan + "@control-node", Plan: plan, Module: "host", Digest: digestB, Generation: 3},
			Queue: []meshapi.QueuedRequest{{Plan: "rollback/metrics", Module: "metrics", Digest: digestA, Generation: 4, Rollback: true},
				{Plan: "plan/mesh-controller/x", Module: "mesh-controller", Digest: digestA, Generation: 1}}},
		Journal: []machines.JournalEntry{{Index: 2, Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.Local), Outcome: "refused", Code: "downgrade", Seq: 3, Plan: plan,
			Force: true, ForcedPast: "host generation 3 below floor 4",
			Containers: []machines.JournalContainer{{Module: "mesh-controller", Digest: digestA}, {Module: "host", Digest: digestB}}}},
	}
	var b bytes.Buffer
	require.NoError(t, writeMachineView(&b, v))
	out := b.String()
	assert.Contains(t, out, "machine control-node  tier 2  modules mesh-controller, host  host http://h\n")
	assert.Contains(t, out, "host reports last seq 3\n")
	assert.Contains(t, out, "warning: the host says it is machine edge-1, not control-node")
	assert.Regexp(t, `MODULE\s+DIGEST\s+GEN\s+PLAN\s+SEQ\s+STATE\s+SINCE\n`, out)
	assert.Regexp(t, `host\s+sha256:aaaaaaaaaaaa\s+2\s+`+plan+`\s+3\s+running\s+s\n`, out)
	assert.Contains(t, out, "(the host does not say which plan brought each build; PLAN and SEQ are its last declaration's)\n")
	assert.Contains(t, out, "workflow machine/control-node: last seq 3, pushing "+plan+"@control-node, 2 queued\n")
	assert.Regexp(t, `now\s+`+plan+`\s+host\s+sha256:bbbbbbbbbbbb\s+3\n`, out)
	assert.NotContains(t, out, "fleet budget", "a push not waiting for the fleet budget says nothing of it")

	// A push waiting for its place in the fleet budget says so, and behind whom.
	v.Workflow.BudgetWait = "waiting for the fleet budget: 1 of 1 unavailable (edge-3 pushing host)"
	b.Reset()
	require.NoError(t, writeMachineView(&b, v))
	assert.Contains(t, b.String(), "workflow machine/control-node: last seq 3, pushing "+plan+"@control-node, 2 queued\n"+
		"waiting for the fleet budget: 1 of 1 unavailable (edge-3 pushing host)\n")
	assert.Regexp(t, `1 rollback, first in line\s+rollback/metrics\s+metrics\s+sha256:aaaaaaaaaaaa\s+4\n`, out)
	assert.Regexp(t, `2\s+plan/mesh-controller/x\s+mesh-controller\s+sha256:aaaaaaaaaaaa\s+1\n`, out)
	assert.Regexp(t, `2\s+2025-01-02 03:04:05\s+refused \(downgrade\)\s+3\s+`+plan+
		`\s+mesh-controller=sha256:aaaaaaaaaaaa,host=sha256:bbbbbbbbbbbb\s+forced past host generation 3 below floor 4\n`, out)

	// Nothing from the host, no workflow yet.
	b.Reset()
	require.NoError(t, writeMachineView(&b, machines.Detail{Machine: "edge-1", Host: "http://h", Tier: 1, Modules: []string{"host"},
		HostError: "host http://h unreachable: connection refused", JournalError: "journal: host http://h unreachable: connection refused"}))
	assert.Equal(t, "machine edge-1  tier 1  modules host  host http://h\n\n"+
		"host http://h unreachable: connection refused\n\n"+
		"workflow machine/edge-1: no machine workflow yet (no plan has pushed it)\n\n", b.String())
}

// A revert in the journal says so, and why, so that the person on call does
// not read it as the failed plan's build applied; a lost-state note too.
func TestMachineViewNamesRevertsAndWhy(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeMachineView(&b, machines.Detail{Machine: "edge-1", Journal: []machines.JournalEntry{
		{Index: 7, Outcome: "applied", Seq: 3, Plan: "plan/host/bad", Revert: true, Reason: "host (sha256:…) is exited",
			Containers: []machines.JournalContainer{{Module: "host", Digest: "sha256:7f87c20e5f670000"}}},
		{Index: 1, Outcome: "applied", Seq: 8, Plan: "plan/host/x", Reason: "host edge-1 reported last sequence 0, below the 7 ...: it lost its state"},
	}}))
	out := b.String()
	assert.Contains(t, out, "applied (revert)")
	assert.Contains(t, out, "  7: put back on what it ran after plan/host/bad failed here: host (sha256:…) is exited")
	assert.Contains(t, out, "  1: host edge-1 reported last sequence 0, below the 7 ...: it lost its state")
}
