package fleetui

import (
	"errors"
	"fmt"
	"net/http"
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

const (
	digestOld     = "sha256:" + "1111111111111111111111111111111111111111111111111111111111111111"
	digestNew     = "sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
	digestMetrics = "sha256:" + "3333333333333333333333333333333333333333333333333333333333333333"
)

// history is a journal of n entries, newest first: host digestOld from
// entry 1, digestNew from entry intro (a forced merge), a metrics plan
// declaring every few entries in between, keeping host as it ran, and a
// running entry after each declaration.
func history(n int, intro uint64) []machines.JournalEntry {
	var out []machines.JournalEntry
	for i := uint64(1); i <= uint64(n); i++ {
		e := machines.JournalEntry{Index: i, Time: t0.Add(time.Duration(i) * time.Minute), Seq: i}
		hostDigest, hostGen := digestOld, int64(26)
		if i >= intro {
			hostDigest, hostGen = digestNew, 27
		}
		switch {
		case i == intro:
			e.Outcome, e.Plan, e.Force, e.ForcedPast = "applied", meshapi.PlanID("host", commit), true, "DowngradeRefused: the floor"
		case i%2 == 0:
			e.Outcome, e.Plan = "running", meshapi.PlanID("metrics", strings.Repeat("9", 40))
		default:
			e.Outcome, e.Plan = "applied", meshapi.PlanID("metrics", strings.Repeat("9", 40))
		}
		e.Containers = []machines.JournalContainer{{Module: "host", Digest: hostDigest, Generation: hostGen}, {Module: "metrics", Digest: digestMetrics, Generation: 5}}
		out = append([]machines.JournalEntry{e}, out...)
	}
	return out
}

func edge1(journal []machines.JournalEntry) *fake {
	src := edges()
	seq := uint64(60)
	src.details = map[string]machines.Detail{"edge-1": {
		Machine: "edge-1", Host: "http://127.0.0.1:7401", Tier: 1, Labels: map[string]string{"site": "fra1", "ring": "canary"}, Modules: []string{"host", "metrics"}, Seq: &seq,
		Containers: []machines.Container{
			{Module: "host", Digest: digestNew, Generation: 27, Commit: commit, Plan: meshapi.PlanID("metrics", strings.Repeat("9", 40)), Seq: 59, State: "running", Since: "2026-10-02T14:41:00Z"},
			{Module: "metrics", Digest: digestMetrics, Generation: 5, Commit: strings.Repeat("9", 40), Plan: meshapi.PlanID("metrics", strings.Repeat("9", 40)), Seq: 59, State: "running"},
		},
		Workflow: &machines.Workflow{ID: "machine/edge-1", LastSeq: 60, Queue: []meshapi.QueuedRequest{
			{Module: "host", Generation: 26, Plan: "rollback/host", Rollback: true}, {Module: "metrics", Generation: 6, Plan: "plan/metrics/x"}},
			Current: &meshapi.QueuedRequest{Module: "host", Generation: 28, Plan: "plan/host/y"}, Floor: []machines.Floor{{Module: "host", Generation: 27}}},
	}}
	src.journal = map[string][]machines.JournalEntry{"edge-1": journal}
	return src
}

// whyCell is the "brought here by" cell of module's row.
func whyCell(t *testing.T, body, module string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<th scope="row">` + module + `</th>.*?</td>\s*<td>.*?</td>\s*<td>(.*?)</td>`).FindStringSubmatch(body)
	require.NotNil(t, m, "a row for %s", module)
	return m[1]
}

// What runs, and why: the declaration that brought each build here, read
// from the journal, or, when the journal read does not reach back to it,
// the merge that built it.
func TestMachineWhy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		journal []machines.JournalEntry
		host    []string
		metrics []string
		// introduced is the host's record of who brought each module's
		// build, by module.
		introduced map[string]*mesh.Introduction
	}{
		{
			name:    "the journal reaches back",
			journal: history(60, 41),
			host: []string{"<code>plan/host/" + commit + "</code><br>merge of host at 5d0e3c1a9f42<br>sequence 41 at 2026-10-02 14:41:00 UTC",
				`<span class="badge flag">forced past DowngradeRefused: the floor</span>`},
			metrics: []string{"<code>plan/metrics/9999999999999999999999999999999999999999</code>", "sequence 1 at"},
		},
		{
			name:    "the journal is longer than what is read",
			journal: history(whyDepth+50, whyDepth+20),
			host:    []string{"sequence 220 at"},
			metrics: []string{"the merge that built it: <code>plan/metrics/9999999999999999999999999999999999999999</code>", "does not reach back to the declaration that brought it here"},
		},
		{
			name:       "the journal is longer than what is read, and the host keeps who brought the build",
			journal:    history(whyDepth+50, whyDepth+20),
			introduced: map[string]*mesh.Introduction{"metrics": {Plan: "plan/metrics/older", Seq: 3}},
			metrics:    []string{"<code>plan/metrics/older</code><br>sequence 3", "by the host's own record"},
		},
		{
			name:    "the journal never names the build",
			journal: []machines.JournalEntry{},
			host:    []string{"the merge that built it: <code>plan/host/" + commit + "</code>"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := edge1(tc.journal)
			for i, c := range src.details["edge-1"].Containers {
				src.details["edge-1"].Containers[i].Introduced = tc.introduced[c.Module]
			}
			srv, _ := server(t, src, twoMachines)
			code, body, _ := get(t, srv, "/machines/edge-1")
			require.Equal(t, http.StatusOK, code)
			for _, w := range tc.host {
				assert.Contains(t, whyCell(t, body, "host"), w)
			}
			for _, w := range tc.metrics {
				assert.Contains(t, whyCell(t, body, "metrics"), w)
			}
			assert.Contains(t, body, "Pushing now: <b>host 28</b> for <code>plan/host/y</code>.")
			if len(tc.journal) > 0 {
				newest := tc.journal[1] // the newest entry is a running one; the one below it was applied
				assert.Contains(t, body, fmt.Sprintf("Last declared by <code>%s</code> (merge of metrics at 999999999999): sequence %d at", newest.Plan, newest.Seq))
			} else {
				assert.NotContains(t, body, "Last declared by")
			}
			assert.Contains(t, body, "2 queued behind it:")
			assert.Contains(t, body, "<li>host 26 for <code>rollback/host</code> — <b>rollback, first in line</b></li>")
			assert.Contains(t, body, "<li>metrics 6 for <code>plan/metrics/x</code></li>")
			assert.Contains(t, body, "Floor (what a push will not go below): host 27.")
		})
	}
}

// journalIndexes are the journal table's entry indexes, in order.
func journalIndexes(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr class="o-[a-z-]+">\s*<td>(\d+)</td>`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestMachineJournalPages(t *testing.T) {
	srv, _ := server(t, edge1(history(60, 41)), twoMachines)
	for _, tc := range []struct {
		query                string
		first, last          string
		newest, newer, older string
	}{
		{query: "", first: "60", last: "36", older: "/machines/edge-1?before=36"},
		{query: "?before=36", first: "35", last: "11", newest: "/machines/edge-1", newer: "/machines/edge-1", older: "/machines/edge-1?before=11"},
		{query: "?before=11", first: "10", last: "1", newest: "/machines/edge-1", newer: "/machines/edge-1?before=36"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			_, body, _ := get(t, srv, "/machines/edge-1"+tc.query)
			idx := journalIndexes(body)
			require.NotEmpty(t, idx)
			assert.Equal(t, tc.first, idx[0])
			assert.Equal(t, tc.last, idx[len(idx)-1])
			for word, link := range map[string]string{"newest": tc.newest, "newer": tc.newer, "older": tc.older} {
				a := fmt.Sprintf(`<a href="%s">%s</a>`, link, word)
				if link == "" {
					assert.NotContains(t, body, ">"+word+"</a>")
				} else {
					assert.Contains(t, body, a)
				}
			}
		})
	}
	_, body, _ := get(t, srv, "/machines/edge-1")
	assert.Contains(t, body, `<td>41</td><td>2026-10-02 14:41:00 UTC</td><td>applied</td><td>41</td>`)
	assert.Contains(t, body, `<span class="badge flag">forced past DowngradeRefused: the floor</span>`)
}

// A machine whose host does not answer still shows its workflow's side,
// and says what could not be read.
func TestMachineHostDown(t *testing.T) {
	src := edge1(nil)
	d := src.details["edge-1"]
	d.Containers, d.Seq, d.HostError = []machines.Container{}, nil, "host http://127.0.0.1:7401 unreachable: connection refused"
	src.details["edge-1"] = d
	src.detailErr = errors.New(d.HostError)
	src.journalErr = errors.New("journal: " + d.HostError)
	srv, _ := server(t, src, twoMachines)
	_, body, _ := get(t, srv, "/machines/edge-1")
	assert.Contains(t, body, "The host did not answer: host http://127.0.0.1:7401 unreachable: connection refused — what runs there is unknown.")
	assert.Contains(t, body, "tier 1 · labels <code>ring=canary,site=fra1</code> · host", "the labels come from the config, not the host")
	assert.Contains(t, body, "Pushing now: <b>host 28</b>")
	assert.NotContains(t, body, "The journal is empty")
	assert.NotContains(t, body, "The host runs nothing")
}
