package meshapi

import (
	"reflect"
	"testing"
)

func TestAnalysisGate(t *testing.T) {
	inconclusive := AnalysisCheck{Check: "error-rate", Verdict: AnalysisInconclusive, Reason: "prom unreachable"}
	dry := AnalysisCheck{Check: "latency", Verdict: AnalysisInconclusive, DryRun: true}
	running := AnalysisCheck{Check: "memory", Verdict: AnalysisRunning}
	plan := func(state PlanStatus, tier2 TierStatus, checks ...AnalysisCheck) PlanState {
		return PlanState{State: state, Tiers: []TierState{
			{Tier: 1, State: TierBaking, Analysis: checks},
			{Tier: 2, State: tier2},
		}}
	}
	for _, tc := range []struct {
		name string
		st   PlanState
		want []TierCheck
	}{
		{"gated on an inconclusive check", plan(PlanGated, TierWaiting, running, inconclusive), []TierCheck{{Tier: 1, Check: inconclusive}}},
		{"a dry run never holds", plan(PlanGated, TierWaiting, dry), nil},
		{"at a tier's gate", plan(PlanGated, TierGated, inconclusive), nil},
		{"not gated", plan(PlanPushing, TierWaiting, inconclusive), nil},
		{"ended", plan(PlanAborted, TierSkipped, inconclusive), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.AnalysisGate(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("AnalysisGate = %+v, want %+v", got, tc.want)
			}
		})
	}
	want := "check error-rate of tier 1 is inconclusive: prom unreachable"
	if got := (TierCheck{Tier: 1, Check: inconclusive}).Inconclusive(); got != want {
		t.Errorf("Inconclusive = %q, want %q", got, want)
	}
	if got := (TierCheck{Tier: 2, Check: AnalysisCheck{Check: "x"}}).Inconclusive(); got != "check x of tier 2 is inconclusive" {
		t.Errorf("Inconclusive without a reason = %q", got)
	}
}
