package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// A machine workflow told its machine left the mesh config serves what it
// has queued, and what arrives before it ends, then ends cleanly instead of
// waiting for requests no plan will send; an idle one ends at once. A push
// that finds the machine gone retires it the same way (a run started by a
// request handed over after the machine left), and a retirement taken
// before continue-as-new is carried across it.
func TestMachineRetiresWhenItsMachineLeaves(t *testing.T) {
	retire := meshapi.Retire{Reason: "left the mesh config"}
	cases := []struct {
		name    string
		in      meshapi.MachineInput
		queued  []meshapi.PushRequest // signalled at once, before the retirement
		late    []meshapi.PushRequest // signalled while the first push runs
		retired bool                  // signal the retirement (else in.Retired carries it)
		left    bool                  // pushes find the machine gone
		pushes  int
	}{
		{name: "idle", retired: true},
		{name: "with pushes queued and one more arriving", retired: true,
			queued: []meshapi.PushRequest{req("plan/a", "host", 1), req("plan/b", "metrics", 1)},
			late:   []meshapi.PushRequest{req("plan/c", "agent", 1)}, pushes: 3},
		{name: "a push that finds the machine gone", queued: []meshapi.PushRequest{req("plan/a", "host", 1)}, left: true, pushes: 1},
		{name: "carried across continue-as-new", in: meshapi.MachineInput{Retired: &retire,
			Queue: []meshapi.PushRequest{req("plan/a", "host", 1)}}, pushes: 1},
	}
	for _, c := range cases {
		eachPushMode(t, func(t *testing.T, h *machineHarness) {
			t.Run(c.name, func(t *testing.T) {
				h.delay = time.Second
				if c.left {
					h.push = func(in meshapi.PushInput) (meshapi.PushOutcome, error) {
						return meshapi.PushOutcome{Outcome: meshapi.MachineSkipped, Reason: "left", Left: true}, nil
					}
				}
				h.install()
				h.signalAt(0, c.queued...)
				h.signalAt(500*time.Millisecond, c.late...)
				if c.retired {
					h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(meshapi.SignalRetire, retire) }, 100*time.Millisecond)
				}
				in := c.in
				in.Machine = "m1"
				for i := range in.Queue {
					in.Queue[i].Local = h.local
				}
				h.env.ExecuteWorkflow(Machine, in)
				require.True(t, h.env.IsWorkflowCompleted())
				require.NoError(t, h.env.GetWorkflowError(), "the workflow ends, not continues as new")
				assert.Len(t, h.pushes, c.pushes, "every request taken was served")
				for _, p := range h.pushes {
					_, ok := h.answer(p.Request.Request)
					assert.True(t, ok, "%s answered", p.Request.Request)
				}
			})
		})
	}
}
