package agent

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

func TestResumeHealthOnlyForTheContainerSeenHealthy(t *testing.T) {
	const (
		started = "2026-12-04T10:00:00Z"
		healthy = "2026-12-04T10:00:02Z"
		now     = "2026-12-04T11:00:00Z"
	)
	seen := mesh.RunningContainer{Module: "web", Digest: digest(1), State: mesh.StateRunning, Health: mesh.HealthHealthy,
		HealthySince: healthy, Restarts: 2}
	for _, tc := range []struct {
		name   string
		replay []Entry
		rc     mesh.RunningContainer
		want   string
	}{
		{"the same container, running since before", nil, mesh.RunningContainer{Module: "web", Digest: digest(1), Restarts: 2, Since: started}, healthy},
		{"restarted since", nil, mesh.RunningContainer{Module: "web", Digest: digest(1), Restarts: 3, Since: started}, now},
		{"started after it was seen healthy", nil, mesh.RunningContainer{Module: "web", Digest: digest(1), Restarts: 2, Since: now}, now},
		{"another build", nil, mesh.RunningContainer{Module: "web", Digest: digest(2), Restarts: 2, Since: started}, now},
		{"another module", nil, mesh.RunningContainer{Module: "db", Digest: digest(1), Restarts: 2, Since: started}, now},
		{"journalled after the checkpoint", []Entry{{Outcome: OutcomeUnhealthy, Containers: []mesh.Container{{Module: "web"}}}},
			mesh.RunningContainer{Module: "web", Digest: digest(1), Restarts: 2, Since: started}, now},
		{"a declaration after the checkpoint", []Entry{{Outcome: OutcomeApplied}},
			mesh.RunningContainer{Module: "web", Digest: digest(1), Restarts: 2, Since: started}, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{resume: resumable([]mesh.RunningContainer{seen}, tc.replay)}
			rc := tc.rc
			require.Equal(t, tc.want, a.healthySinceLocked(&rc, now))
			require.Equal(t, now, a.healthySinceLocked(&rc, now), "a mark is used once")
		})
	}
}
