package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// findingRuntime is the noop runtime standing for an engine that still
// runs what an earlier agent of the machine declared.
type findingRuntime struct {
	*NoopRuntime
	found []mesh.Container
	err   error
	finds atomic.Int32
}

func (r *findingRuntime) Find(context.Context) ([]mesh.Container, error) {
	r.finds.Add(1)
	return r.found, r.err
}

func openFinding(t *testing.T, dir string, rt *findingRuntime) *Agent {
	t.Helper()
	a, err := Open(context.Background(), Options{Machine: testMachine, StateDir: dir, Runtime: rt, Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	return a
}

// An agent started on an empty state directory, on a runtime whose
// containers outlived the last agent, reports what runs and keeps it,
// at sequence 0, its journal saying so; the first declaration is then
// judged as any first one, and no later start looks again.
func TestAnAgentWithNoStateKeepsWhatItFindsRunning(t *testing.T) {
	web, db := ctr("web", 7), ctr("db", 3)
	rt := &findingRuntime{NoopRuntime: NewNoopRuntime(0), found: []mesh.Container{db, web}}
	dir := t.TempDir()
	a := openFinding(t, dir, rt)

	rep, err := a.Report(context.Background())
	require.NoError(t, err)
	require.Zero(t, rep.LastSeq, "nothing was declared to this agent")
	require.Len(t, rep.Containers, 2, "it reports what it found")
	for i, want := range []mesh.Container{db, web} {
		require.Equal(t, want.Module, rep.Containers[i].Module)
		require.Equal(t, want.Digest, rep.Containers[i].Digest)
		require.Empty(t, rep.Containers[i].Plan, "no plan of this agent's put it there")
		require.Nil(t, rep.Containers[i].Introduced)
	}
	es := journalOf(t, a) // newest first; the runtime's reports follow the found entry
	first := es[len(es)-1]
	require.Equal(t, OutcomeFound, first.Outcome, "the new journal starts with what was found")
	require.Equal(t, []mesh.Container{db, web}, first.Containers)
	require.Contains(t, first.Reason, "found db "+mesh.ShortDigest(db.Digest)+", web "+mesh.ShortDigest(web.Digest)+" left running")

	// The first declaration is judged as any: sequence 1 is taken.
	res, err := a.Apply(context.Background(), decl(1, ctr("web", 8), db))
	require.NoError(t, err)
	require.False(t, res.Repeat)

	require.NoError(t, a.Close(context.Background()))
	a = openFinding(t, dir, rt)
	require.EqualValues(t, 1, rt.finds.Load(), "an agent with a journal never looks again")
	rep, err = a.Report(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.LastSeq)
}

// Sequence 0 is the found state's, never a declaration's: one sent at 0
// is refused as stale, so nothing can pass for what was found.
func TestFoundStateTakesNoDeclarationAtSequenceZero(t *testing.T) {
	web := ctr("web", 7)
	rt := &findingRuntime{NoopRuntime: NewNoopRuntime(0), found: []mesh.Container{web}}
	a := openFinding(t, t.TempDir(), rt)
	_, err := a.Apply(context.Background(), mesh.Declaration{Machine: testMachine, Seq: 0, Containers: []mesh.Container{web}})
	var r *host.Refusal
	require.True(t, errors.As(err, &r), "a declaration at sequence 0: %v", err)
	require.Equal(t, host.CodeSequence, r.Code)
}

// An engine that cannot say what runs leaves the agent starting empty, as
// before: it starts, and says why in its log.
func TestAnAgentStartsEmptyWhenItCannotLook(t *testing.T) {
	rt := &findingRuntime{NoopRuntime: NewNoopRuntime(0), err: errors.New("engine down")}
	a := openFinding(t, t.TempDir(), rt)
	rep, err := a.Report(context.Background())
	require.NoError(t, err)
	require.Empty(t, rep.Containers)
	require.Empty(t, journalOf(t, a))
}
