package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/syncbuf"
)

func TestStatusRefusesBadInputBeforeDialing(t *testing.T) {
	cfg := writeConfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--module", "nope"}, `unknown module "nope" (known: host, mesh-controller); add it to modules: in ` + cfg},
		{[]string{"--machine", "edge-9"}, `unknown machine "edge-9" (known: control-node, edge-1); add it to machines: in ` + cfg},
		{[]string{"--watch", "--interval", "0s"}, "--interval 0s: want at least 100ms"},
		{[]string{"--interval", "5s"}, "--interval 5s needs --watch"},
		{[]string{"--interval", "soon"}, `invalid argument "soon" for "--interval" flag`},
		{[]string{"edge-1"}, `unknown command "edge-1" for "starter status"`},
	} {
		r := run(t, append([]string{"--config", cfg, "status"}, tc.args...)...)
		require.Error(t, r.err, tc.args)
		assert.Contains(t, r.err.Error(), tc.want, tc.args)
		assert.NotContains(t, r.err.Error(), unreachable, "refused before dialing: %v", tc.args)
		assert.Equal(t, ExitUsage, ExitCode(r.err), tc.args)
		assert.Empty(t, r.stdout, tc.args)
	}
}

// statusJSON is the part of `status --output json` scripts rely on.
type statusJSON struct {
	AskedAt       time.Time        `json:"asked_at"`
	NewestHealthy map[string]int64 `json:"newest_healthy"`
	Rows          []struct {
		Machine    string  `json:"machine"`
		Tier       int     `json:"tier"`
		Module     string  `json:"module"`
		Generation *int64  `json:"generation"`
		Commit     string  `json:"commit"`
		Digest     string  `json:"digest"`
		Health     string  `json:"health"`
		Plan       string  `json:"plan"`
		Seq        *uint64 `json:"seq"`
		Behind     *int64  `json:"behind"`
		Drift      string  `json:"drift"`
		HostError  string  `json:"host_error"`
	} `json:"rows"`
	Machines []machines.Row `json:"machines"`
}

// With Temporal unreachable, status shows what the hosts said, says
// Temporal could not be asked, and exits 1; a dead host is named, not a
// failure.
func TestStatusWithoutTemporal(t *testing.T) {
	plan := meshapi.PlanID("host", commit)
	url := fakeHost(t, mesh.Report{Machine: "edge-1", LastSeq: 4, Containers: []mesh.RunningContainer{
		{Module: "host", Digest: digestA, Generation: 3, Plan: plan, Seq: 4, State: mesh.StateRunning, Health: mesh.HealthHealthy,
			Env: map[string]string{"SECRET": "x"}},
	}}, host.JournalPage{})
	cfg := configWithHosts(t, "http://127.0.0.1:1", url)

	r := run(t, "--config", cfg, "status", "--output", "json")
	require.Error(t, r.err)
	assert.Equal(t, ExitError, ExitCode(r.err))
	assert.Contains(t, r.err.Error(), "temporal unreachable at "+unreachable)
	assert.NotContains(t, r.stdout, "SECRET", "no settings in the output")
	var st statusJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	assert.Equal(t, map[string]int64{"host": 3}, st.NewestHealthy)
	require.Len(t, st.Rows, 3, r.stdout)
	e1 := st.Rows[0]
	assert.Equal(t, "edge-1", e1.Machine)
	require.NotNil(t, e1.Generation)
	assert.EqualValues(t, 3, *e1.Generation)
	assert.Equal(t, commit, e1.Commit, "from the module's own plan")
	assert.Equal(t, plan, e1.Plan)
	assert.EqualValues(t, 0, *e1.Behind)
	assert.Empty(t, e1.Drift)
	for _, cn := range st.Rows[1:] {
		assert.Equal(t, "control-node", cn.Machine)
		assert.Nil(t, cn.Generation)
		assert.Contains(t, cn.HostError, "unreachable")
	}
	require.Len(t, st.Machines, 2)
	assert.Equal(t, machines.HostOK, st.Machines[0].HostStatus)
	assert.Equal(t, machines.HostUnreachable, st.Machines[1].HostStatus)
	assert.Contains(t, st.Machines[1].WorkflowError, "temporal unreachable")

	r = run(t, "--config", cfg, "status")
	require.Error(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 8, r.stdout)
	assert.Regexp(t, `^MACHINE\s+TIER\s+MODULE\s+GEN\s+COMMIT\s+HEALTH\s+BEHIND\s+PLAN\s+SEQ\s+QUEUE\s+DRIFT\s+FROZEN$`, lines[0])
	assert.Regexp(t, `^edge-1\s+1\s+host\s+3\s+0123456789ab\s+healthy\s+0\s+plan/host/0123456789ab\s+4\s+\?\s+-\s+\?$`, lines[1],
		"frozen or not is unknown without the worker")
	assert.Regexp(t, `^control-node\s+2\s+host(\s+\?){9}$`, lines[2])
	assert.Regexp(t, `^control-node\s+2\s+mesh-controller(\s+\?){9}$`, lines[3])
	assert.Regexp(t, `^control-node: host http://127\.0\.0\.1:1: unreachable: .+`, lines[4])
	assert.Regexp(t, `^machine workflows not asked: .*temporal unreachable at `+unreachable, lines[5], "said once, not per machine")
	assert.Regexp(t, `^freezes not read: .*temporal unreachable at `+unreachable, lines[6])
	assert.Regexp(t, `^every host asked directly: no fleet picture here \(no catalogue at .+catalogue\.db: set catalogue\.dsn to the worker's\)$`, lines[7])

	r = run(t, "--config", cfg, "status", "--machine", "edge-1", "--module", "host", "-o", "json")
	require.Error(t, r.err)
	st = statusJSON{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	require.Len(t, st.Rows, 1)
	require.Len(t, st.Machines, 1)
	assert.Equal(t, "edge-1", st.Machines[0].Machine)
}

func TestWriteStatus(t *testing.T) {
	gen, old, seq, q, zero, one, two := int64(27), int64(26), uint64(9), 2, 0, int64(1), int64(0)
	plan := meshapi.PlanID("host", commit)
	st := machines.Status{
		Rows: []machines.StatusRow{
			{Machine: "edge-1", Tier: 1, Module: "host", Generation: &gen, Commit: commit, Digest: digestA, State: mesh.StateRunning,
				Health: mesh.HealthHealthy, Restarts: 1, Plan: plan, Seq: &seq, Behind: &two},
			{Machine: "edge-1", Tier: 1, Module: "metrics", Generation: &old, State: mesh.StateCrashLooping, Health: mesh.HealthUnhealthy,
				Restarts: 5, Plan: "by-hand", Seq: &seq, Drift: machines.DriftUnexpected},
			{Machine: "edge-2", Tier: 1, Module: "host", HostError: "host http://h2: unreachable: connection refused"},
			{Machine: "control-node", Tier: 2, Module: "host", Generation: &old, Commit: commit, State: mesh.StateRunning, Plan: plan, Seq: &seq, Behind: &one, PutBack: true},
			{Machine: "control-node", Tier: 2, Module: "mesh-controller", Drift: machines.DriftMissing},
		},
		Freezes: []mesh.Freeze{{ID: 1, Machine: "control-node", By: "alice", Reason: "disk swap"}},
		Machines: []machines.Row{
			{Machine: "edge-1", Queue: &zero, HostStatus: machines.HostOK},
			{Machine: "edge-2", HostStatus: machines.HostUnreachable, HostError: "host http://h2: unreachable: connection refused",
				WorkflowError: "query timed out"},
			{Machine: "control-node", Queue: &q, Current: &meshapi.QueuedRequest{Plan: plan}, HostStatus: machines.HostOK},
		},
	}
	st.SetFreezes(st.Freezes, nil)
	var b bytes.Buffer
	require.NoError(t, writeStatus(&b, st))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 9, b.String())
	assert.Regexp(t, `^edge-1\s+1\s+host\s+27\s+0123456789ab\s+healthy \(1 restart\)\s+0\s+plan/host/0123456789ab\s+9\s+0\s+-\s+-$`, lines[1])
	assert.Regexp(t, `^edge-1\s+1\s+metrics\s+26\s+-\s+crash-looping \(5 restarts\)\s+-\s+by-hand\s+9\s+0\s+unexpected\s+-$`, lines[2])
	assert.Regexp(t, `^edge-2\s+1\s+host(\s+\?){8}\s+-$`, lines[3])
	assert.Regexp(t, `^control-node\s+2\s+host\s+26\s+0123456789ab\s+running\s+1\s+plan/host/0123456789ab \(put back\)\s+9\s+2\+1\s+-\s+frozen$`, lines[4],
		"a host that does not judge health: its state; a freeze of the machine holds it; the plan that failed there and put it back, marked")
	assert.Regexp(t, `^control-node\s+2\s+mesh-controller(\s+-){6}\s+2\+1\s+missing\s+frozen$`, lines[5])
	assert.Equal(t, "edge-2: host http://h2: unreachable: connection refused", lines[6])
	assert.Equal(t, "edge-2: workflow machine/edge-2: query timed out", lines[7], "one machine's own failure is its own line")
	assert.Regexp(t, `^frozen: .*machine control-node.*alice.*disk swap`, lines[8])

	b.Reset()
	require.NoError(t, writeStatus(&b, machines.Status{Machines: []machines.Row{{Machine: "edge-1", HostStatus: machines.HostOK}}}))
	assert.Equal(t, "no module matches: no machine asked is given it or runs it\n", b.String())
}

func watchStatus(t *testing.T, refreshes int, args ...string) ([]string, error) {
	t.Helper()
	t.Setenv("MESHROLL_TEMPORAL_ADDRESS", "")
	t.Setenv(config.EnvConfig, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := &syncbuf.Writes{N: refreshes, Cancel: cancel}
	var stderr bytes.Buffer
	err := Execute(ctx, args, out, &stderr)
	require.NotErrorIs(t, ctx.Err(), context.DeadlineExceeded, "the watch never printed %d refreshes", refreshes)
	return out.All(), err
}

// --watch goes on while Temporal is unreachable (saying so in each
// refresh), writes one JSON object a line with --output json, and ends
// without an error when interrupted.
func TestStatusWatch(t *testing.T) {
	url := fakeHost(t, mesh.Report{Machine: "edge-1", LastSeq: 1, Containers: []mesh.RunningContainer{
		{Module: "host", Digest: digestA, Generation: 3, Plan: meshapi.PlanID("host", commit), Seq: 1, State: mesh.StateRunning},
	}}, host.JournalPage{})
	cfg := configWithHosts(t, url, url)

	writes, err := watchStatus(t, 2, "--config", cfg, "status", "--watch", "--interval", "100ms", "-o", "json")
	require.NoError(t, err, "interrupting a watch is how it ends")
	require.Len(t, writes, 2)
	for _, w := range writes {
		require.True(t, strings.HasSuffix(w, "\n") && strings.Count(w, "\n") == 1, "one line a refresh: %q", w)
		var st statusJSON
		require.NoError(t, json.Unmarshal([]byte(w), &st), w)
		assert.Len(t, st.Rows, 3)
		assert.Contains(t, st.Machines[0].WorkflowError, "temporal unreachable")
	}

	writes, err = watchStatus(t, 1, "--config", cfg, "status", "--watch", "--module", "host")
	require.NoError(t, err)
	require.Len(t, writes, 1)
	assert.NotContains(t, writes[0], clearScreen, "not a terminal: no escapes")
	assert.Regexp(t, `^status at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, every 2s \(Ctrl-C to stop\)\n\nMACHINE\s+TIER`, writes[0])
	assert.Regexp(t, `(?m)^edge-1\s+1\s+host\s+3\s+0123456789ab\s+running\s+0\s+`, writes[0])
	assert.Contains(t, writes[0], "machine workflows not asked: ")
}

// A module missing everywhere because no build of it has run healthy yet
// is not one machine drifting: the DRIFT column says so.
func TestWriteStatusSaysNoneYet(t *testing.T) {
	st := machines.Status{Rows: []machines.StatusRow{
		{Machine: "edge-1", Tier: 1, Module: "metrics", Drift: machines.DriftMissing, NoneYet: true},
	}, Machines: []machines.Row{{Machine: "edge-1", HostStatus: machines.HostOK}}}
	st.SetFreezes(nil, nil)
	var b bytes.Buffer
	require.NoError(t, writeStatus(&b, st))
	assert.Regexp(t, `(?m)^edge-1\s+1\s+metrics(\s+-){6}\s+-\s+missing \(none yet\)\s+-$`, b.String())
}
