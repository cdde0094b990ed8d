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
