package plans

import (
	"fmt"
	"testing"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
)

// midTier is a plan of n machines in two tiers, 10 and the rest, half way
// through its second: what following it reads at every poll.
func midTier(n int) meshapi.PlanState {
	st := meshapi.PlanState{Plan: "plan/host/0123456789abcdef0123456789abcdef01234567", Module: "host", State: meshapi.PlanPushing,
		Tiers: []meshapi.TierState{{Tier: 1, State: meshapi.TierConverged}, {Tier: 2, State: meshapi.TierPushing, Window: 1000}}}
	for i := range n {
		ti, m := 1, meshapi.MachineProgress{Machine: fmt.Sprintf("edge-%05d", i), Group: "site=fra1"}
		switch {
		case i < 10:
			ti, m.State, m.Seq = 0, meshapi.MachineConverged, 7
		case i%1000 == 17:
			m.State, m.Reason, m.Seq = meshapi.MachineFailed, "container host exited (code 2) before it was healthy for 10s", 7
		case i < n/2:
			m.State, m.Seq = meshapi.MachineConverged, 7
		case i < n/2+1000:
			m.State = meshapi.MachinePushing
		default:
			m.State, m.Reason = meshapi.MachinePushing, meshapi.WaitsItsTurn+": the plan has 1000 pushes handed over and unanswered at most (push.hand_window)"
		}
		st.Tiers[ti].Machines = append(st.Tiers[ti].Machines, m)
	}
	return st
}

// BenchmarkFollowingALargePlan is what one poll of a plan being followed
// (plan watch, merge --wait: twice a second) costs at 10,000 machines: the
// worker encoding the query's answer through the payload converter, the
// starter decoding it and keying it to see whether it moved. B/poll is the
// answer's size as it travels.
func BenchmarkFollowingALargePlan(b *testing.B) {
	st := midTier(10000)
	for _, c := range []struct {
		name   string
		answer func() meshapi.PlanState
	}{
		{"state", func() meshapi.PlanState { return st }},
		{"summary", st.Summarised},
	} {
		b.Run(c.name, func(b *testing.B) {
			size := 0
			for b.Loop() {
				p, err := payloads.Converter.ToPayload(c.answer())
				if err != nil {
					b.Fatal(err)
				}
				size = len(p.GetData())
				var got meshapi.PlanState
				if err := payloads.Converter.FromPayload(p, &got); err != nil {
					b.Fatal(err)
				}
				_ = fmt.Sprintf("%+v", got.Summarised())
			}
			b.ReportMetric(float64(size), "B/poll")
		})
	}
}
