package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/syncbuf"
)

// statusJSON is the part of `status --output json` scripts rely on.
type statusJSON struct {
	HostsFrom      string           `json:"hosts_from"`
	WorkflowsFedAt *time.Time       `json:"workflows_fed_at"`
	NewestHealthy  map[string]int64 `json:"newest_healthy"`
	Rows           []statusRowJSON  `json:"rows"`
	Machines       []struct {
		Machine       string  `json:"machine"`
		Queue         *int    `json:"queue"`
		LastSeq       *uint64 `json:"last_seq"`
		HostStatus    string  `json:"host_status"`
		HostError     string  `json:"host_error"`
		HostFreshness string  `json:"host_freshness"`
		WorkflowError string  `json:"workflow_error"`
	} `json:"machines"`
}

type statusRowJSON struct {
	Machine    string  `json:"machine"`
	Tier       int     `json:"tier"`
	Module     string  `json:"module"`
	Generation *int64  `json:"generation"`
	Commit     string  `json:"commit"`
	Digest     string  `json:"digest"`
	State      string  `json:"state"`
	Health     string  `json:"health"`
	Plan       string  `json:"plan"`
	Seq        *uint64 `json:"seq"`
	PutBack    bool    `json:"put_back"`
	Behind     *int64  `json:"behind"`
	Drift      string  `json:"drift"`
	HostError  string  `json:"host_error"`
	Frozen     bool    `json:"frozen"`
}

// byKey indexes rows by "machine/module".
func (st statusJSON) byKey() map[string]statusRowJSON {
	m := map[string]statusRowJSON{}
	for _, r := range st.Rows {
		m[r.Machine+"/"+r.Module] = r
	}
	return m
}

func (s *stack) status(args ...string) (statusJSON, error) {
	s.t.Helper()
	out, err := s.starter(append([]string{"status", "--output", "json"}, args...)...)
	var st statusJSON
	require.NoError(s.t, json.Unmarshal([]byte(out), &st), "output %q, error %v", out, err)
	return st, err
}

// addMachine adds a machine to the starter's config (not the worker's: no
// plan pushes it) served by a new host agent of its own, as a machine just
// added to mesh.yaml is before any plan has reached it.
func (s *stack) addMachine(name string, tier int, modules ...string) *agentHost {
	s.t.Helper()
	h := newAgentHost(s.t, name, func(string) agent.Runtime { return agent.NewNoopRuntime(0) })
	y, err := os.ReadFile(s.configPath)
	require.NoError(s.t, err)
	line := fmt.Sprintf("  %s: {host: %q, tier: %d, modules: [%s]}\n", name, h.URL(), tier, strings.Join(modules, ", "))
	require.Contains(s.t, string(y), "\nmachines:\n")
	y = []byte(strings.Replace(string(y), "\nmachines:\n", "\nmachines:\n"+line, 1))
	p := filepath.Join(s.t.TempDir(), "mesh.yaml")
	require.NoError(s.t, os.WriteFile(p, y, 0o644))
	s.configPath = p
	return h
}

// After host g1 converged everywhere and g2 waits at the gate before tier
// 2, status says edge-1 runs g2 and control-node g1, one behind, each with
// the plan that put it there; what the config gives a machine and its host
// does not run is missing, what a host runs that the config does not give
// it is unexpected; a host down is named and the rest still shown.
func TestStatus(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	h1 := s.commit("host")
	p1 := s.converge("host", h1).Plan
	h2 := s.commit("host")
	p2 := s.startGated("host", h2, 2)
	g1, g2 := s.build("host", h1), s.build("host", h2)
	require.Equal(t, int64(1), g2.Generation-g1.Generation, "consecutive commits")

	// edge-2 is new in the config and runs nothing yet; on edge-3 someone
	// started a controller by hand.
	s.addMachine("edge-2", 1, "host")
	e3 := s.addMachine("edge-3", 1, "host")
	byHand := "sha256:" + strings.Repeat("c", 64)
	_, err := e3.a.Apply(context.Background(), mesh.Declaration{Machine: "edge-3", Seq: 1, Plan: "by-hand", Request: "by-hand@edge-3",
		Containers: []mesh.Container{{Module: "mesh-controller", Digest: byHand, Generation: 1}}})
	require.NoError(t, err)
	// The noop runtime starts it at once; wait for the host to say so, so
	// that the status below is not read mid-start.
	eventually(t, 30*time.Second, "edge-3 to run its controller", func() bool {
		rc, ok := e3.Report().Running("mesh-controller")
		return ok && rc.Healthy()
	})
	s.summariesShowHosts("edge-1", "control-node")

	st, err := s.status()
	require.NoError(t, err)
	require.Equal(t, g2.Generation, st.NewestHealthy["host"])
	rows := st.byKey()
	require.Len(t, rows, 6, "%+v", st.Rows)

	e1 := rows["edge-1/host"]
	require.Equal(t, g2.Generation, *e1.Generation)
	require.Equal(t, h2, e1.Commit)
	require.Equal(t, g2.Digest, e1.Digest)
	require.Equal(t, p2, e1.Plan)
	require.Equal(t, s.hosts["edge-1"].Report().LastSeq, *e1.Seq)
	require.Equal(t, int64(0), *e1.Behind)
	require.Empty(t, e1.Drift)
	require.Equal(t, mesh.StateRunning, e1.State)

	cn := rows["control-node/host"]
	require.Equal(t, g1.Generation, *cn.Generation)
	require.Equal(t, h1, cn.Commit)
	require.Equal(t, p1, cn.Plan, "g2 is gated before tier 2")
	require.Equal(t, int64(1), *cn.Behind)
	require.Empty(t, cn.Drift)

	for _, key := range []string{"control-node/mesh-controller", "edge-2/host", "edge-3/host"} {
		r := rows[key]
		require.Equal(t, "missing", r.Drift, key)
		require.Nil(t, r.Generation, key)
		require.Nil(t, r.Behind, key)
	}
	ctl := rows["edge-3/mesh-controller"]
	require.Equal(t, "unexpected", ctl.Drift)
	require.Equal(t, int64(1), *ctl.Generation)
	require.Equal(t, "by-hand", ctl.Plan)
	require.Empty(t, ctl.Commit, "no commit declared, and not a plan's")

	var order []string
	for _, r := range st.Rows {
		order = append(order, r.Machine+"/"+r.Module)
	}
	require.Equal(t, []string{"edge-1/host", "edge-2/host", "edge-3/host", "edge-3/mesh-controller",
		"control-node/host", "control-node/mesh-controller"}, order, "by tier, machine, module")
	queues := map[string]*int{}
	for _, m := range st.Machines {
		require.Equal(t, "ok", m.HostStatus, m.Machine)
		require.Empty(t, m.WorkflowError, m.Machine)
		queues[m.Machine] = m.Queue
	}
	require.Equal(t, 0, *queues["edge-1"])
	require.Equal(t, 0, *queues["control-node"], "the gated plan has queued nothing at control-node")
	require.Nil(t, queues["edge-2"], "no plan has pushed edge-2: no workflow, no error")

	// The table says the same for a person.
	out, err := s.starter("status")
	require.NoError(t, err, out)
	t.Logf("starter status:\n%s", out)
	short := func(c string) string { return regexp.QuoteMeta(mesh.ShortCommit(c)) }
	require.Regexp(t, `(?m)^edge-1\s+1\s+host\s+`+fmt.Sprint(g2.Generation)+`\s+`+short(h2)+`\s+\S+\s+0\s+plan/host/`+short(h2)+`\s+\d+\s+0\s+-\s+-$`, out)
	require.Regexp(t, `(?m)^control-node\s+2\s+host\s+`+fmt.Sprint(g1.Generation)+`\s+`+short(h1)+`\s+\S+\s+1\s+plan/host/`+short(h1)+`\s+\d+\s+0\s+-\s+-$`, out)
	require.Regexp(t, `(?m)^control-node\s+2\s+mesh-controller(\s+-){6}\s+0\s+missing\s+-$`, out)
	require.Regexp(t, `(?m)^edge-2\s+1\s+host(\s+-){6}\s+-\s+missing\s+-$`, out)
	require.Regexp(t, `(?m)^edge-3\s+1\s+mesh-controller\s+1\s+-\s+\S+\s+0\s+by-hand\s+1\s+-\s+unexpected\s+-$`, out)

	// A freeze of the control node: its rows say frozen, the others not,
	// and the freeze is named below the table.
	out, err = s.starter("freeze", "--machine", "control-node", "--reason", "disk swap", "--by", "alice")
	require.NoError(t, err, out)
	st, err = s.status()
	require.NoError(t, err)
	for key, r := range st.byKey() {
		require.Equal(t, r.Machine == "control-node", r.Frozen, key)
	}
	out, err = s.starter("status")
	require.NoError(t, err, out)
	require.Regexp(t, `(?m)^control-node\s+2\s+host\s+.*\sfrozen$`, out)
	require.Regexp(t, `(?m)^frozen: machine control-node: .*alice.*disk swap`, out)
	out, err = s.starter("unfreeze", "--machine", "control-node", "--by", "alice")
	require.NoError(t, err, out)

	// One module, one machine: still behind the whole fleet.
	st, err = s.status("--module", "host", "--machine", "control-node")
	require.NoError(t, err)
	require.Len(t, st.Rows, 1)
	require.Equal(t, int64(1), *st.Rows[0].Behind)

	// edge-1's host down: named, the rest shown. What it ran no longer
	// counts: control-node now runs the newest healthy build anyone
	// reports.
	s.hosts["edge-1"].SetDown(true)
	st, err = s.status()
	require.NoError(t, err, "a host down is not a failure")
	rows = st.byKey()
	require.Len(t, rows, 6)
	require.Contains(t, rows["edge-1/host"].HostError, s.hosts["edge-1"].URL())
	require.Nil(t, rows["edge-1/host"].Generation)
	require.Equal(t, g1.Generation, *rows["control-node/host"].Generation)
	require.Equal(t, int64(0), *rows["control-node/host"].Behind)
	require.Equal(t, "missing", rows["edge-2/host"].Drift)
	out, err = s.starter("status")
	require.NoError(t, err, out)
	t.Logf("starter status, edge-1's host down:\n%s", out)
	require.Regexp(t, `(?m)^edge-1\s+1\s+host(\s+\?){6}\s+0\s+\?\s+-$`, out, "its queue is still known")
	require.Regexp(t, `(?m)^edge-1: host `+regexp.QuoteMeta(s.hosts["edge-1"].URL())+`.*$`, out)
	s.hosts["edge-1"].SetDown(false)

	// --watch, until the first refresh is printed.
	refreshes := watchStatus(t, s, "--output", "json")
	require.Len(t, refreshes, 1)
	require.Equal(t, 1, strings.Count(refreshes[0], "\n"), "one JSON object a line")
	var w statusJSON
	require.NoError(t, json.Unmarshal([]byte(refreshes[0]), &w), refreshes[0])
	require.Equal(t, g2.Generation, *w.byKey()["edge-1/host"].Generation)
	refreshes = watchStatus(t, s, "--module", "host")
	require.Regexp(t, `^status at .+ \(Ctrl-C to stop\)\n\nMACHINE\s+TIER\s+MODULE`, refreshes[0])
	require.Regexp(t, `(?m)^control-node\s+2\s+host\s+`+fmt.Sprint(g1.Generation)+`\s+`, refreshes[0])
}

// watchStatus runs `status --watch` until its first refresh is printed,
// and returns what it wrote; the watch must end without an error.
func watchStatus(t *testing.T, s *stack, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := &syncbuf.Writes{N: 1, Cancel: cancel}
	var errb bytes.Buffer
	err := cli.Execute(ctx, append([]string{"--config", s.configPath, "status", "--watch"}, args...), out, &errb)
	require.NoError(t, err, errb.String())
	require.NotErrorIs(t, ctx.Err(), context.DeadlineExceeded, "no refresh printed")
	return out.All()
}
