package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// gatedAt2 is a plan that pushed tier 1 and waits at its gate before tier 2.
func gatedAt2() meshapi.PlanState {
	return meshapi.PlanState{Plan: "plan/host/c", Module: "host", Commit: "c", State: meshapi.PlanGated, Gates: []int{2},
		Tiers: []meshapi.TierState{
			{Tier: 1, State: meshapi.TierConverged, Machines: []meshapi.MachineProgress{{Machine: "edge-1", State: meshapi.MachineConverged, Seq: 3}}},
			{Tier: 2, State: meshapi.TierGated, Machines: []meshapi.MachineProgress{{Machine: "control-node", State: meshapi.MachineWaiting}}},
		}}
}

func TestNextStep(t *testing.T) {
	paused := gatedAt2()
	paused.State, paused.Paused, paused.Tiers[1].State = meshapi.PlanPaused, true, meshapi.TierWaiting
	frozen := gatedAt2()
	frozen.State, frozen.Reason, frozen.Tiers[1].State = meshapi.PlanHeld, "held: freeze by alice: disk swap", meshapi.TierWaiting
	window := frozen
	window.Reason = "held: outside window, opens at 2026-12-07T08:00:00Z (deny window: weekend)"
	pushing := gatedAt2()
	pushing.State, pushing.Tiers[1].State = meshapi.PlanPushing, meshapi.TierPushing
	ended := gatedAt2()
	ended.State, ended.Tiers[1].State = meshapi.PlanAborted, meshapi.TierSkipped

	// The active freezes: one of the control node (which the plan has still
	// to push), one of the whole mesh, one of another module and one of a
	// machine it pushed already, which hold nothing of it.
	active := func(context.Context) ([]mesh.Freeze, error) {
		return []mesh.Freeze{
			{ID: 1, Machine: "control-node", By: "alice", Reason: "disk swap"},
			{ID: 2, By: "bob", Reason: "release week"},
			{ID: 3, Module: "metrics", By: "carol", Reason: "x"},
			{ID: 4, Machine: "edge-1", By: "dave", Reason: "y"},
		}, nil
	}
	unread := func(context.Context) ([]mesh.Freeze, error) { return nil, errors.New("worker away") }

	for _, tc := range []struct {
		name    string
		config  string
		st      meshapi.PlanState
		freezes freezeLookup
		want    string
	}{
		{"at a gate", "", gatedAt2(), nil, "approve with: starter plan approve plan/host/c --tier 2"},
		{"at a gate, with --config", "/etc/mesh.yaml", gatedAt2(), nil, "approve with: starter --config /etc/mesh.yaml plan approve plan/host/c --tier 2"},
		{"paused", "", paused, nil, "resume with: starter plan resume plan/host/c"},
		{"held by freezes", "", frozen, active, "lift the freeze with: starter unfreeze --machine control-node, and starter unfreeze; the plan then goes on by itself"},
		{"held by a freeze, freezes unread", "", frozen, unread, `lift the freeze with: starter unfreeze [--module M] [--machine X], its scope as "starter freeze list" lists it; the plan then goes on by itself`},
		{"held by a window", "", window, active, "no command lifts a deployment window: the plan goes on by itself when it opens"},
		{"pushing", "", pushing, active, ""},
		{"ended", "", ended, active, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &app{configFlag: tc.config}
			assert.Equal(t, tc.want, a.nextStep(context.Background(), tc.st, tc.freezes))
		})
	}
}

// Following a plan, the command that opens its gate is printed once, when
// it starts waiting there, and again only for another wait.
func TestProgressSaysHowToApproveOnce(t *testing.T) {
	var b bytes.Buffer
	p := newProgressPrinter(&b, nil)
	asked := 0
	p.next = func(st meshapi.PlanState) string {
		asked++
		return (&app{}).nextStep(context.Background(), st, nil)
	}
	st := gatedAt2()
	p.show(st)
	p.show(st)
	assert.Equal(t, 1, asked, "asked when the plan's line changed, not at every poll")
	assert.Equal(t, "plan/host/c gated\n"+
		"tier 1: converged  edge-1=converged\n"+
		"tier 2: gated  control-node=waiting\n"+
		"approve with: starter plan approve plan/host/c --tier 2\n", b.String())

	b.Reset()
	st.State, st.Tiers[1].State = meshapi.PlanPushing, meshapi.TierPushing
	p.show(st)
	assert.NotContains(t, b.String(), "approve")

	b.Reset()
	st.State, st.Reason = meshapi.PlanHeld, "held: freeze by alice: disk swap"
	p.show(st)
	assert.Equal(t, 1, strings.Count(b.String(), "starter unfreeze"), b.String())
}

func TestShowSaysHowToApprove(t *testing.T) {
	var b bytes.Buffer
	a := &app{stdout: &b}
	st := gatedAt2()
	require.NoError(t, a.printState(st, a.nextStep(context.Background(), st, nil), measurementLimit{n: DefaultMeasurements}, nil))
	lines := strings.Split(b.String(), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Equal(t, "plan plan/host/c  module host  commit c  state gated  gates 2  reason -", lines[0])
	assert.Equal(t, "approve with: starter plan approve plan/host/c --tier 2", lines[1])
	assert.Empty(t, lines[2])
}
