package fleetui

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

var commit = strings.Repeat("5d0e3c1a9f42", 4)[:40]

// gated is a plan of host waiting at its gate before tier 2, with tier 1
// converged, and a gate ahead before tier 3.
func gated() Plan {
	id := meshapi.PlanID("host", commit)
	return Plan{
		Summary: plans.Summary{Plan: id, Module: "host", Commit: commit, State: "gated", Status: "running", Started: t0},
		State: &meshapi.PlanState{Plan: id, Module: "host", Commit: commit, State: meshapi.PlanGated, Gates: []int{2, 3},
			Build: &mesh.Build{Module: "host", Commit: commit, Digest: "sha256:" + strings.Repeat("e", 64), Generation: 27},
			Tiers: []meshapi.TierState{
				{Tier: 1, State: meshapi.TierConverged, Policy: &meshapi.TierPolicy{Tier: 1, MaxParallel: 1, MaxFailed: 1, Bake: 5 * time.Minute},
					Machines: []meshapi.MachineProgress{{Machine: "edge-1", State: meshapi.MachineConverged, Seq: 4}, {Machine: "edge-2", State: meshapi.MachineFailed, Reason: "container exited"}}},
				{Tier: 2, State: meshapi.TierGated, Machines: []meshapi.MachineProgress{{Machine: "control-node", State: meshapi.MachineWaiting}}},
				{Tier: 3, State: meshapi.TierWaiting, Machines: []meshapi.MachineProgress{{Machine: "db-1", State: meshapi.MachineWaiting}}},
			}},
	}
}

func TestPlansPage(t *testing.T) {
	held := Plan{
		Summary: plans.Summary{Plan: "rollback/metrics", Module: "metrics", State: "held", Status: "running", Started: t0},
		State: &meshapi.PlanState{Plan: "rollback/metrics", Module: "metrics", State: meshapi.PlanHeld, Reason: "held: freeze by alice: disk swap",
			Tiers: []meshapi.TierState{{Tier: 1, State: meshapi.TierPushing, Batch: 2, Batches: 3,
				Machines: []meshapi.MachineProgress{{Machine: "edge-1", State: meshapi.MachinePushing}}}}},
	}
	unread := Plan{Summary: plans.Summary{Plan: "sync/edge-3/host", Module: "host", State: "pushing", Status: "running"}, Error: "query plan sync/edge-3/host: deadline exceeded"}
	closed := t0.Add(-time.Hour)
	src := edges()
	src.plans = []Plan{gated(), held, unread}
	src.recent = []plans.Summary{{Plan: "plan/host/" + strings.Repeat("a", 40), State: "aborted", Closed: &closed}, {Plan: gated().Summary.Plan, State: "gated"}}
	for _, tc := range []struct {
		name   string
		ui     string
		want   []string
		absent []string
	}{
		{
			name: "with the Web UI's URL",
			ui:   "http://127.0.0.1:8233/",
			want: []string{
				`<b>Waiting at its gate before tier 2.</b> To approve:`,
				`<pre class="cmd"><code>starter plan approve plan/host/` + commit + ` --tier 2</code></pre>`,
				`Gate ahead before tier 3; approve it ahead of time with <code>starter plan approve plan/host/` + commit + ` --tier 3</code>`,
				`href="http://127.0.0.1:8233/namespaces/default/workflows/plan%2Fhost%2F` + commit + `"`,
				`href="http://127.0.0.1:8233/namespaces/default/workflows/rollback%2Fmetrics"`,
				"merge of host at 5d0e3c1a9f42 · host generation 27 (5d0e3c1a9f42, sha256:eeeeeeeeeeee)",
				`<b>Held:</b> held: freeze by alice: disk swap`,
				"rollback of metrics",
				"batch 2 of 3",
				"batches of 1, 1 may fail, bakes 5m0s",
				`<meter min="0" max="2" value="2">2/2</meter> 2/2 done`,
				`<span class="count m-failed">1 failed</span><span class="count m-converged">1 converged</span>`,
				`title="failed; container exited">edge-2 <small>failed</small></a>`,
				`title="converged; sequence 4">edge-1`,
				"sync of host on edge-3",
				"Its state could not be read: query plan sync/edge-3/host: deadline exceeded",
				`<code>plan/host/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa</code></td><td><span class="badge p-aborted">aborted</span></td><td>2026-10-02 13:00:00 UTC</td>`,
			},
		},
		{
			name:   "without it, no links",
			want:   []string{`starter plan approve plan/host/` + commit + ` --tier 2`},
			absent: []string{"Temporal Web UI</a>", "/namespaces/"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg("edge-1:1:host", "edge-2:1:host", "control-node:2:host", "db-1:3:host")
			c.Temporal.UIURL = tc.ui
			srv, _ := server(t, src, c)
			_, body, _ := get(t, srv, "/plans")
			for _, w := range tc.want {
				assert.Contains(t, body, w)
			}
			for _, a := range tc.absent {
				assert.NotContains(t, body, a)
			}
			assert.Equal(t, 1, strings.Count(body, `<code>`+gated().Summary.Plan+`</code>`), "a plan in flight is not listed again as recent")
		})
	}
}

// The matrix says what moves, and a plan pushing a machine colours that
// machine's cell as rolling.
func TestMatrixShowsWhatMoves(t *testing.T) {
	p := gated()
	p.State.State = meshapi.PlanPushing
	p.Summary.State = "pushing"
	p.State.Tiers[1].State = meshapi.TierPushing
	p.State.Tiers[1].Machines[0].State = meshapi.MachinePushing
	src := edges()
	src.plans = []Plan{p, gated()}
	srv, _ := server(t, src, twoMachines)
	_, body, _ := get(t, srv, "/")
	assert.Contains(t, body, `<a href="/plans#plan-plan-host-`+commit+`"><span class="badge p-gated">gated</span>`)
	assert.Contains(t, body, "<b>waiting at its gate before tier 2</b>: <code>starter plan approve plan/host/"+commit+" --tier 2</code>")
	assert.Regexp(t, `<a href="/machines/control-node">control-node</a></th>\s*<td class="cell s-rolling"`, body)
	require.Contains(t, body, "being pushed by plan/host/"+commit)
}

// analysing is gated() with tier 1's checks: error-rate inconclusive after
// some measurements, the plan waiting on it, and a dry-run latency check
// that passed.
func analysing() Plan {
	p := gated()
	p.State.Tiers[1].State = meshapi.TierWaiting
	at := t0.Add(10 * time.Minute)
	p.State.Tiers[0].State = meshapi.TierBaking
	p.State.Tiers[0].Analysis = []meshapi.AnalysisCheck{
		{Check: "error-rate", Provider: "prom", Count: 10, FailureLimit: 1, Verdict: meshapi.AnalysisInconclusive,
			Reason: "prom unreachable for 3 measurements in a row",
			Measurements: []meshapi.Measurement{
				{At: at, Value: 0.011, Passed: true}, {At: at.Add(30 * time.Second), Value: 0.9},
				{At: at.Add(time.Minute), Value: 0.012, Passed: true}, {At: at.Add(90 * time.Second), Error: "connection refused"}}},
		{Check: "latency", Provider: "prom", Count: 3, Verdict: meshapi.AnalysisPassed, DryRun: true,
			Measurements: []meshapi.Measurement{{At: at, Value: 0.2, Passed: true}, {At: at, Value: 0.2, Passed: true}, {At: at, Value: 0.25, Passed: true}}},
	}
	return p
}

func TestPlanShowsItsChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plan   Plan
		want   []string
		absent []string
	}{
		{
			name: "an inconclusive check holds the plan",
			plan: analysing(),
			want: []string{
				`<li class="check v-inconclusive" title="error-rate inconclusive: 3 of 10 measured, 1 failed of 1 allowed, 1 could not be measured, last -; prom unreachable for 3 measurements in a row"><b>error-rate</b> inconclusive 3/10, 1 failed, 1 unmeasured, last -</li>`,
				`<li class="check v-passed" title="latency passed (dry run): 3 of 3 measured, 0 failed of 0 allowed, last 0.25"><b>latency</b> passed 3/3, last 0.25, dry run</li>`,
				`<b>Waiting on an inconclusive analysis:</b> check error-rate of tier 1 is inconclusive: prom unreachable for 3 measurements in a row. Once you have checked why, to pass it:`,
				`<pre class="cmd"><code>starter plan approve plan/host/` + commit + `</code></pre>`,
			},
			absent: []string{"Waiting at its gate", "--tier 2</code></pre>"},
		},
		{
			name: "approved, it goes on",
			plan: func() Plan {
				p := analysing()
				p.State.State, p.Summary.State = meshapi.PlanPushing, "pushing"
				p.State.Tiers[0].Analysis[0].Verdict, p.State.Tiers[0].Analysis[0].Reason = meshapi.AnalysisApproved, "approved by alice"
				return p
			}(),
			want:   []string{`<b>error-rate</b> approved 3/10, 1 failed, 1 unmeasured, last -</li>`},
			absent: []string{"inconclusive analysis", "starter plan approve plan/host/" + commit + "</code></pre>"},
		},
		{
			name: "a check waiting out its initial delay says when it first measures",
			plan: func() Plan {
				p := analysing()
				due := t0.Add(12 * time.Minute)
				p.State.Tiers[0].Analysis[1] = meshapi.AnalysisCheck{Check: "latency", Provider: "prom", Count: 3, Verdict: meshapi.AnalysisWaiting, FirstDue: &due}
				return p
			}(),
			want: []string{`<b>latency</b> waiting 0/3, first at ` + t0.Add(12*time.Minute).UTC().Format("15:04:05 MST") + `</li>`},
		},
		{
			name:   "a tier without checks has no list",
			plan:   gated(),
			want:   []string{"Waiting at its gate before tier 2."},
			absent: []string{`class="checks"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := edges()
			src.plans = []Plan{tc.plan}
			srv, _ := server(t, src, cfg("edge-1:1:host", "edge-2:1:host", "control-node:2:host", "db-1:3:host"))
			_, body, _ := get(t, srv, "/plans")
			for _, w := range tc.want {
				assert.Contains(t, body, w)
			}
			for _, a := range tc.absent {
				assert.NotContains(t, body, a)
			}
		})
	}
	// The matrix's list of what moves says what the plan waits on.
	src := edges()
	src.plans = []Plan{analysing()}
	srv, _ := server(t, src, twoMachines)
	_, body, _ := get(t, srv, "/")
	assert.Contains(t, body, "<b>waiting on an inconclusive analysis</b>: <code>starter plan approve plan/host/"+commit+"</code>")
}

// A tier put back after its analysis failed counts its machines as they
// are: reverting ones still moving (not done), reverted ones and those a
// halted plan skipped each under their own state, none dropped.
func TestTierCountsPutBackMachines(t *testing.T) {
	tier := meshapi.TierState{Tier: 1, State: meshapi.TierHalted, Machines: []meshapi.MachineProgress{
		{Machine: "e1", State: meshapi.MachineReverted}, {Machine: "e2", State: meshapi.MachineReverting},
		{Machine: "e3", State: meshapi.MachineSkipped},
	}}
	v := tierOf(tier)
	assert.Equal(t, []meshapi.StateCount{{State: "reverting", N: 1}, {State: "reverted", N: 1}, {State: "skipped", N: 1}}, v.Counts)
	assert.Equal(t, 2, v.Done, "a machine being put back is not done")
}

// A tier handed over a window at a time counts the pushes still waiting
// for room apart from those handed over, names them so on their chips,
// and the matrix does not call them pushed by the plan yet.
func TestTierCountsPushesWaitingTheirTurn(t *testing.T) {
	waits := meshapi.WaitsItsTurn + ": the plan has 1 pushes handed over and unanswered at most (push.hand_window)"
	tier := meshapi.TierState{Tier: 1, State: meshapi.TierPushing, Window: 1, Machines: []meshapi.MachineProgress{
		{Machine: "e1", State: meshapi.MachinePushing}, {Machine: "e2", State: meshapi.MachinePushing, Reason: waits},
		{Machine: "e3", State: meshapi.MachinePushing, Reason: waits},
	}}
	v := tierOf(tier)
	assert.Equal(t, []meshapi.StateCount{{State: "pushing", N: 1}, {State: "waiting-turn", N: 2}}, v.Counts)
	assert.Zero(t, v.Done)
	assert.Equal(t, "handed over 1 at a time", v.Notes)
	require.Len(t, v.Machines, 3)
	assert.Equal(t, "pushing", v.Machines[0].State)
	assert.Equal(t, "waiting-turn", v.Machines[1].State)
	assert.True(t, strings.HasPrefix(v.Machines[1].Title, "waiting-turn; waits its turn"), v.Machines[1].Title)

	now := pushingNow(&Snapshot{Plans: []Plan{{Summary: plans.Summary{Plan: "plan/host/c"},
		State: &meshapi.PlanState{Module: "host", Tiers: []meshapi.TierState{tier}}}}})
	assert.Equal(t, map[string]string{"e1\x00host": "plan/host/c"}, now)
}
