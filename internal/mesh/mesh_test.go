package mesh

import "testing"

func TestRunningContainerHealthy(t *testing.T) {
	for _, tc := range []struct {
		state, health string
		want          bool
	}{
		{StateRunning, HealthHealthy, true},
		{StateRunning, HealthUnknown, false},
		{StateRunning, HealthUnhealthy, false},
		{StateRunning, "", true}, // a host that does not judge health
		{StateStarting, "", false},
		{StateCrashLooping, "", false},
		{StateExited, HealthUnhealthy, false},
	} {
		if got := (RunningContainer{State: tc.state, Health: tc.health}).Healthy(); got != tc.want {
			t.Errorf("state %q health %q: Healthy() = %v, want %v", tc.state, tc.health, got, tc.want)
		}
	}
}

func TestBroughtBy(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *Introduction
		plan string
		seq  uint64
		said bool
	}{
		{"the host does not say", nil, "plan/metrics/b", 7, false},
		{"the plan that brought it", &Introduction{Plan: "plan/host/a", Seq: 3}, "plan/host/a", 3, true},
		{"a revert is not the failed plan bringing it", &Introduction{Plan: "plan/host/c", Seq: 5, Revert: true}, "plan/host/c (put back after it failed)", 5, true},
	} {
		plan, seq, said := BroughtBy(tc.in, "plan/metrics/b", 7)
		if plan != tc.plan || seq != tc.seq || said != tc.said {
			t.Errorf("%s: got %q %d %v, want %q %d %v", tc.name, plan, seq, said, tc.plan, tc.seq, tc.said)
		}
	}
}
