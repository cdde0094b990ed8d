package fleetui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Each cell is coloured by the worst thing true of it, and every thing
// true of it is kept for the filters.
func TestCellStates(t *testing.T) {
	digest := row("edge-1", 1, "host", 27).Digest
	for _, tc := range []struct {
		name     string
		row      machines.StatusRow
		rejected bool
		pushedBy string
		current  *meshapi.QueuedRequest
		state    string
		states   []string
		frozen   bool
		note     string
		title    string // a substring of the cell's title; "" for no check
	}{
		{name: "healthy on the newest build", row: row("edge-1", 1, "host", 27), state: stateHealthy, states: []string{stateHealthy}},
		{name: "healthy, no judge of health", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.Health = "" }), state: stateHealthy, states: []string{stateHealthy}},
		{name: "behind", row: row("edge-1", 1, "host", 25, behind(2)), state: stateBehind, states: []string{stateBehind}, note: "2 behind"},
		{name: "not behind at 0", row: row("edge-1", 1, "host", 27, behind(0)), state: stateHealthy, states: []string{stateHealthy}},
		{name: "exited", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.State = mesh.StateExited }), state: stateFailed, states: []string{stateFailed}, note: "exited"},
		{name: "crash-looping and behind", row: row("edge-1", 1, "host", 26, behind(1), func(r *machines.StatusRow) { r.State = mesh.StateCrashLooping }),
			state: stateFailed, states: []string{stateFailed, stateBehind}, note: "crash-looping"},
		{name: "unhealthy", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.Health = mesh.HealthUnhealthy }), state: stateFailed, states: []string{stateFailed}, note: "unhealthy"},
		{name: "rejected build", row: row("edge-1", 1, "host", 27), rejected: true, state: stateRejected, states: []string{stateRejected}, note: "rejected"},
		{name: "starting", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.State = mesh.StateStarting }), state: stateRolling, states: []string{stateRolling}, note: "rolling"},
		{name: "a plan pushes it", row: row("edge-1", 1, "host", 26, behind(1)), pushedBy: "plan/host/c", state: stateRolling, states: []string{stateRolling, stateBehind}},
		{name: "its machine workflow pushes this module", row: row("edge-1", 1, "host", 27), current: &meshapi.QueuedRequest{Module: "host", Plan: "plan/host/c"}, state: stateRolling, states: []string{stateRolling}},
		{name: "its machine workflow pushes another module", row: row("edge-1", 1, "host", 27), current: &meshapi.QueuedRequest{Module: "metrics"}, state: stateHealthy, states: []string{stateHealthy}},
		{name: "missing", row: machines.StatusRow{Machine: "edge-1", Tier: 1, Module: "host", Drift: machines.DriftMissing}, state: stateDrift, states: []string{stateDrift}, note: "missing"},
		{name: "missing, and healthy nowhere yet", row: machines.StatusRow{Machine: "edge-1", Tier: 1, Module: "host", Drift: machines.DriftMissing, NoneYet: true}, state: stateDrift, states: []string{stateDrift}, note: "none yet"},
		{name: "unexpected", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.Drift = machines.DriftUnexpected }), state: stateDrift, states: []string{stateDrift}, note: "unexpected"},
		{name: "host did not answer", row: machines.StatusRow{Machine: "edge-1", Tier: 1, Module: "host", HostError: "host http://x unreachable"}, state: stateUnknown, states: []string{stateUnknown}, note: "host?"},
		{name: "last declared by its plan", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.Plan = "plan/host/c" }), state: stateHealthy, states: []string{stateHealthy},
			title: "last declared by plan/host/c"},
		{name: "put back after a plan failed", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.Plan, r.PutBack = "plan/host/bad", true }), state: stateHealthy, states: []string{stateHealthy},
			title: "put back on it by plan/host/bad (sequence 3) after that plan's build failed here"},
		{name: "frozen and healthy", row: row("edge-1", 1, "host", 27, func(r *machines.StatusRow) { r.Frozen = true }), state: stateHealthy, states: []string{stateHealthy, stateFrozen}, frozen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rej := map[string]mesh.Rejection{}
			if tc.rejected {
				rej[digest] = mesh.Rejection{By: "alice", Reason: "leaks"}
			}
			c := makeCell(tc.row, rej, tc.pushedBy, tc.current)
			assert.True(t, c.On)
			assert.Equal(t, "edge-1", c.Machine)
			assert.Equal(t, "host", c.Module)
			assert.Equal(t, tc.state, c.State)
			assert.Equal(t, tc.states, c.States)
			assert.Equal(t, tc.frozen, c.Frozen)
			if tc.note != "" {
				assert.Equal(t, tc.note, c.Note)
			}
			if tc.rejected {
				assert.Contains(t, c.Title, "rejected by alice")
			}
			if tc.title != "" {
				assert.Contains(t, c.Title, tc.title)
			}
		})
	}
}

// machinesShown are the machines of the matrix's rows, in order.
func machinesShown(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<th scope="row"><a href="/machines/([^"]+)">`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestMatrixFilters(t *testing.T) {
	src := &fake{status: status(
		row("edge-1", 1, "host", 27), row("edge-1", 1, "metrics", 5),
		row("edge-2", 1, "host", 26, behind(1)), row("edge-2", 1, "metrics", 5),
		row("control-node", 2, "host", 26, behind(1), func(r *machines.StatusRow) { r.State = mesh.StateExited }),
		row("control-node", 2, "mesh-controller", 3),
		machines.StatusRow{Machine: "db-1", Tier: 3, Module: "metrics", HostError: "host http://db-1 unreachable: refused"},
	)}
	src.status.Machines[3].HostStatus = machines.HostUnreachable
	src.status.Machines[0].Labels = map[string]string{"ring": "canary", "site": "fra1"}
	src.status.Machines[1].Labels = map[string]string{"ring": "main", "site": "ams2"}
	src.freezes = []mesh.Freeze{{ID: 1, Module: "metrics", Machine: "edge-2", By: "alice", Reason: "disk swap", At: t0}}
	srv, _ := server(t, src, cfg("edge-1:1:host,metrics", "edge-2:1:host,metrics", "control-node:2:host,mesh-controller", "db-1:3:metrics"))
	for _, tc := range []struct {
		query   string
		shown   []string
		columns []string
		notes   []string
	}{
		{query: "", shown: []string{"edge-1", "edge-2", "control-node", "db-1"}, columns: []string{"host", "mesh-controller", "metrics"}},
		{query: "module=mesh-controller", shown: []string{"control-node"}, columns: []string{"mesh-controller"}},
		{query: "module=host&module=metrics", shown: []string{"edge-1", "edge-2", "control-node", "db-1"}, columns: []string{"host", "metrics"}},
		{query: "state=behind", shown: []string{"edge-2", "control-node"}},
		{query: "state=failed", shown: []string{"control-node"}},
		{query: "state=unknown", shown: []string{"db-1"}},
		{query: "state=frozen", shown: []string{"edge-2"}},
		{query: "state=not-healthy", shown: []string{"edge-2", "control-node", "db-1"}},
		{query: "state=healthy", shown: []string{"edge-1", "edge-2", "control-node"}},
		{query: "module=mesh-controller&state=failed", shown: nil},
		{query: "q=EDGE", shown: []string{"edge-1", "edge-2"}},
		{query: "q=edge&state=behind", shown: []string{"edge-2"}},
		{query: "selector=ring%3Dcanary", shown: []string{"edge-1"}},
		{query: "selector=site+in+(fra1,+ams2)&state=behind", shown: []string{"edge-2"}},
		{query: "selector=!ring", shown: []string{"control-node", "db-1"}},
		{query: "selector=ring+in+canary", shown: []string{"edge-1", "edge-2", "control-node", "db-1"},
			notes: []string{`selector &#34;ring in canary&#34;: at position 9: want ( after in`}},
		{query: "module=nginx&state=sleepy", shown: []string{"edge-1", "edge-2", "control-node", "db-1"},
			notes: []string{`no module &#34;nginx&#34; in this fleet; modules are host, mesh-controller, metrics`, `no state &#34;sleepy&#34;; states are not-healthy, unknown`}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			code, body, _ := get(t, srv, "/?"+tc.query)
			require.Equal(t, 200, code)
			assert.Equal(t, tc.shown, machinesShown(body))
			if tc.columns != nil {
				var cols []string
				for _, m := range regexp.MustCompile(`<th scope="col">([a-z-]+)( <small>|</th>)`).FindAllStringSubmatch(body, -1) {
					if m[1] != "machine" {
						cols = append(cols, m[1])
					}
				}
				assert.Equal(t, tc.columns, cols[:len(tc.columns)], "the first tier's columns")
			}
			for _, n := range tc.notes {
				assert.Contains(t, body, n)
			}
			if len(tc.shown) == 0 {
				assert.Contains(t, body, "No machine matches")
			}
		})
	}
}

// At a thousand machines a tier starts folded, its dots and counts in
// view; a filter unfolds what it keeps.
func TestMatrixFoldsLargeTiers(t *testing.T) {
	var rows []machines.StatusRow
	var specs []string
	for i := range openTierMax + 1 {
		name := fmt.Sprintf("w-%03d", i)
		rows = append(rows, row(name, 1, "host", 27))
		specs = append(specs, name+":1:host")
	}
	rows = append(rows, row("c-1", 2, "host", 27))
	specs = append(specs, "c-1:2:host")
	srv, _ := server(t, &fake{status: status(rows...)}, cfg(specs...))
	_, body, _ := get(t, srv, "/")
	assert.Contains(t, body, `<details id="tier-1" ><summary>`, "the large tier is folded")
	assert.Contains(t, body, `<details id="tier-2" open><summary>`)
	assert.Equal(t, openTierMax+2, strings.Count(body, `class="dot s-healthy"`), "a dot a machine")
	_, body, _ = get(t, srv, "/?q=w-")
	assert.Contains(t, body, `<details id="tier-1" open><summary>`, "a filter unfolds what it keeps")
}

// Each machine's labels are shown beside its name, and the selector field
// keeps what was asked.
func TestMatrixShowsLabels(t *testing.T) {
	src := &fake{status: status(row("edge-1", 1, "host", 27), row("edge-2", 1, "host", 27))}
	src.status.Machines[0].Labels = map[string]string{"site": "fra1", "ring": "canary"}
	srv, _ := server(t, src, cfg("edge-1:1:host", "edge-2:1:host"))
	_, body, _ := get(t, srv, "/?selector=ring")
	assert.Contains(t, body, `edge-1</a> <small class="labels">ring=canary,site=fra1</small>`)
	assert.Contains(t, body, `<input type="search" name="selector" value="ring"`)
	assert.Equal(t, []string{"edge-1"}, machinesShown(body))
}

// Hosts read from the fleet picture say how long ago the worker heard
// them; a silent one is marked stale, its words in the badge's title.
func TestMatrixSaysHowFreshEachHostIs(t *testing.T) {
	src := &fake{status: status(row("edge-1", 1, "host", 27),
		machines.StatusRow{Machine: "edge-2", Tier: 1, Module: "host", HostError: "silent: last heard at 2026-10-02 13:55:00Z"})}
	heard := time.Date(2026, 10, 2, 13, 59, 57, 0, time.UTC)
	src.status.Machines[0].HostHeardAt, src.status.Machines[0].HostFreshness = &heard, "heard 3s ago"
	src.status.Machines[1].HostStatus = machines.HostStale
	srv, _ := server(t, src, cfg("edge-1:1:host", "edge-2:1:host"))
	_, body, _ := get(t, srv, "/")
	assert.Contains(t, body, `edge-1</a> <small class="heard">heard 3s ago</small>`)
	assert.Contains(t, body, `edge-2</a> <span class="badge s-unknown" title="silent: last heard at 2026-10-02 13:55:00Z">host stale</span>`)
}
