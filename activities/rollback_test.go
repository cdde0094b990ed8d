package activities

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host/hosttest"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// RollbackTarget's choices, on a catalogue of host generations 1 to 4 that
// all ran healthy (3 the same bits as 4), with edge-1 on 4 and edge-2 on
// 2: what it rolls back to, which machines it reaches, what it rejects,
// and every target it refuses for good, naming why, while rejecting
// nothing.
func TestRollbackTarget(t *testing.T) {
	b := map[int64]mesh.Build{}
	for g := int64(1); g <= 4; g++ {
		b[g] = bld("host", g)
	}
	same := b[4]
	same.Commit, same.Generation = b[3].Commit, 3 // reproducible: 3 and 4 are the same bits
	b[3] = same

	for _, tc := range []struct {
		name     string
		to       string
		rejected []int64
		from     int64 // a put-back's one build (RollbackTargetInput.From), 0 for none
		want     int64 // generation rolled back to; 0: refused
		machines []string
		errType  string
		says     string
	}{
		{name: "by default the newest healthy build below what runs, skipping the same bits", want: 2, machines: []string{"edge-1"}},
		{name: "a rejected build is no target", rejected: []int64{2}, want: 1, machines: []string{"edge-1", "edge-2"}},
		{name: "a named target", to: b[1].Commit, want: 1, machines: []string{"edge-1", "edge-2"}},
		{name: "an ambiguous prefix", to: b[1].Commit[:8], errType: meshapi.ErrInvalidInput, says: "names more than one build"},
		{name: "not below what runs", to: b[4].Commit, errType: meshapi.ErrInvalidInput, says: "is not below generation 4"},
		{name: "a rejected target", to: b[1].Commit, rejected: []int64{1}, errType: meshapi.ErrRejected, says: "was rejected by"},
		{name: "an unknown commit", to: "abcdef0123", errType: meshapi.ErrUnknownBuild, says: "no build of host at commit abcdef0123"},
		{name: "a prefix too short", to: "abc", errType: meshapi.ErrInvalidInput, says: "at least 7"},
		{name: "a put-back reaches only the machines on its build", from: 2, want: 1, machines: []string{"edge-2"}},
		{name: "nothing healthy below", rejected: []int64{1, 2}, errType: meshapi.ErrUnknownBuild, says: "name one with --to"},
		{name: "nothing healthy below a put-back's build: the command to name one", from: 4, rejected: []int64{1, 2}, errType: meshapi.ErrUnknownBuild,
			says: "no build of host below generation 4 ran healthy anywhere and is not rejected; generation 4 is rejected and its machines keep it: starter rollback --module host --to COMMIT puts them on a build you name, or merge a fix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cat := catalogue.NewMemory()
			for g := int64(1); g <= 4; g++ {
				require.NoError(t, cat.Record(ctx, b[g], "plan/test"))
				require.NoError(t, cat.MarkConverged(ctx, b[g].Digest, "edge-1"))
			}
			for _, g := range tc.rejected {
				_, err := cat.Reject(ctx, "host", b[g].Commit, "alice", "bad")
				require.NoError(t, err)
			}
			e1, e2 := hosttest.New(t, "edge-1"), hosttest.New(t, "edge-2")
			e1.Seed(running(b[4]))
			e2.Seed(running(b[2]))
			a := &Activities{
				Mesh:      &config.Config{Modules: map[string]config.Module{"host": {}}},
				Catalogue: cat, Hosts: fixedHosts{"edge-1": e1, "edge-2": e2},
				PollInterval: time.Millisecond, Log: zerolog.Nop(),
			}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			in := meshapi.RollbackTargetInput{
				Plan: meshapi.RollbackID("host"), Module: "host", Machines: []string{"edge-1", "edge-2"},
				Rollback: meshapi.Rollback{To: tc.to, By: "bob", Reason: "leaks memory"},
			}
			if tc.from != 0 {
				from := b[tc.from]
				in.From = &from
			}
			res, err := execute[meshapi.RollbackTargetResult](t, env, a.RollbackTarget, in)
			if tc.errType != "" {
				appErr := requireAppError(t, err, tc.errType)
				require.True(t, appErr.NonRetryable(), "refused for good")
				require.Contains(t, appErr.Error(), tc.says)
				r, rejected, err := cat.Rejected(ctx, b[4].Digest)
				require.NoError(t, err)
				if tc.from != 0 {
					// A put-back's build failed its analysis: rejected
					// even with nothing below to put its machines back on.
					require.True(t, rejected, "a put-back's build is rejected, a way back or not")
					require.Contains(t, r.Reason, "by bob: leaks memory; nothing below it to put its machines back on")
					return
				}
				require.False(t, rejected, "a refused rollback rejects nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Build.Generation)
			require.Equal(t, tc.machines, res.Machines)
			runs := map[string]mesh.Build{"edge-1": b[4], "edge-2": b[2]}
			for _, m := range res.Machines {
				r, rejected, err := cat.Rejected(ctx, runs[m].Digest)
				require.NoError(t, err)
				require.True(t, rejected, "%s's build, rolled back from, is rejected", m)
				if !slices.Contains(tc.rejected, runs[m].Generation) {
					require.Equal(t, meshapi.RollbackID("host"), r.By)
					require.Contains(t, r.Reason, "by bob: leaks memory")
				}
			}
			if tc.from != 0 {
				_, rejected, err := cat.Rejected(ctx, b[4].Digest)
				require.NoError(t, err)
				require.False(t, rejected, "a put-back rejects only its own build")
			}
		})
	}
}

// SyncTarget: the newest build that ran healthy somewhere and is not
// rejected, for a module the machine should run; anything else refused
// for good, naming why.
func TestSyncTarget(t *testing.T) {
	ctx := context.Background()
	cat := catalogue.NewMemory()
	b1, b2 := bld("host", 1), bld("host", 2)
	for _, b := range []mesh.Build{b1, b2} {
		require.NoError(t, cat.Record(ctx, b, "plan/test"))
		require.NoError(t, cat.MarkConverged(ctx, b.Digest, "edge-2"))
	}
	_, err := cat.Reject(ctx, "host", b2.Commit, "alice", "leaks")
	require.NoError(t, err)
	a := &Activities{
		Mesh: &config.Config{
			Modules:  map[string]config.Module{"host": {}, "metrics": {}},
			Machines: map[string]config.Machine{"edge-1": {Modules: []string{"host", "metrics"}}, "edge-2": {Modules: []string{"host"}}},
		},
		Catalogue: cat, Log: zerolog.Nop(),
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	for _, tc := range []struct {
		module, machine string
		want            mesh.Build
		errType, says   string
	}{
		{"host", "edge-1", b1, "", ""},
		{"metrics", "edge-2", mesh.Build{}, meshapi.ErrInvalidInput, "does not run metrics"},
		{"host", "edge-9", mesh.Build{}, meshapi.ErrUnknownMachine, `machine "edge-9"`},
		{"metrics", "edge-1", mesh.Build{}, meshapi.ErrUnknownBuild, "merge one first"},
	} {
		got, err := execute[mesh.Build](t, env, a.SyncTarget, meshapi.SyncTargetInput{Module: tc.module, Machine: tc.machine})
		if tc.errType != "" {
			appErr := requireAppError(t, err, tc.errType, "%s on %s", tc.module, tc.machine)
			require.True(t, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), tc.says)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "the newest healthy build that is not rejected")
	}
}
