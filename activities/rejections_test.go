package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host/hosttest"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// signals is a Temporal client that records the notifications handed to
// Notifier workflows (signal-with-start) and nothing else; every other
// method panics through the nil interface it embeds.
type signals struct {
	client.Client
	mu   sync.Mutex
	sent map[string][]meshapi.NotifyEvent
}

func (s *signals) SignalWithStartWorkflow(_ context.Context, id, _ string, arg any, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent[id] = append(s.sent[id], arg.(meshapi.NotifyEvent))
	return nil, nil
}

// A rollback announces the builds it rejects (what it rolls back from),
// once each: a build an operator rejected earlier was announced then.
func TestRollbackAnnouncesWhatItRejects(t *testing.T) {
	for _, tc := range []struct {
		name      string
		earlier   bool
		announced bool
	}{
		{name: "rejected by the rollback", announced: true},
		{name: "rejected before by an operator", earlier: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cat := catalogue.NewMemory()
			b1, b2 := bld("host", 1), bld("host", 2)
			for _, b := range []mesh.Build{b1, b2} {
				require.NoError(t, cat.Record(ctx, b, "plan/test"))
				require.NoError(t, cat.MarkConverged(ctx, b.Digest, "edge-1"))
			}
			if tc.earlier {
				_, err := cat.Reject(ctx, "host", b2.Commit, "alice", "bad")
				require.NoError(t, err)
			}
			e1 := hosttest.New(t, "edge-1")
			e1.Seed(running(b2))
			sig := &signals{sent: map[string][]meshapi.NotifyEvent{}}
			cfg := &config.Config{Modules: map[string]config.Module{"host": {}}}
			cfg.Notify.Targets = map[string]config.NotifyTarget{
				"team":  {Events: []string{meshapi.EventBuildRejected}},
				"other": {Events: []string{meshapi.EventPlanHalted}},
			}
			a := &Activities{Mesh: cfg, Catalogue: cat, Hosts: fixedHosts{"edge-1": e1}, Temporal: sig, PollInterval: time.Millisecond, Log: zerolog.Nop()}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			res, err := execute[meshapi.RollbackTargetResult](t, env, a.RollbackTarget, meshapi.RollbackTargetInput{
				Plan: meshapi.RollbackID("host"), Module: "host", Machines: []string{"edge-1"},
				Rollback: meshapi.Rollback{By: "bob", Reason: "leaks memory"},
			})
			require.NoError(t, err)
			require.Equal(t, int64(1), res.Build.Generation)
			if !tc.announced {
				require.Empty(t, sig.sent)
				return
			}
			id := meshapi.NotifierID("team", meshapi.PlanID("host", b2.Commit))
			require.Len(t, sig.sent, 1, "only the target that wants build_rejected")
			require.Len(t, sig.sent[id], 1)
			e := sig.sent[id][0]
			require.Equal(t, meshapi.EventBuildRejected, e.Event)
			require.Equal(t, b2.Commit, e.Commit)
			require.Contains(t, e.Reason, "rolled back to generation 1")
		})
	}
}
