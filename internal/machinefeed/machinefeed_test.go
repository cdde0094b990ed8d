package machinefeed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// store is a hand-written Store: what All and Since answer next, and what
// they were asked.
type store struct {
	all, since plans.Summaries
	err        error
	fulls      int
	asked      []time.Time // Since's t, each call
}

func (s *store) All(context.Context) (plans.Summaries, error) {
	s.fulls++
	return s.all, s.err
}

func (s *store) Since(_ context.Context, t time.Time) (plans.Summaries, error) {
	s.asked = append(s.asked, t)
	return s.since, s.err
}

func sums(unpublished []string, bySeq map[string]uint64) plans.Summaries {
	out := plans.Summaries{ByMachine: map[string]meshapi.MachineSummary{}, Unpublished: map[string]bool{}}
	for m, seq := range bySeq {
		out.ByMachine[m] = meshapi.MachineSummary{Machine: m, LastSeq: seq}
	}
	for _, m := range unpublished {
		out.Unpublished[m] = true
	}
	return out
}

// clock is a time the test moves by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time       { return c.now }
func (c *clock) move(d time.Duration) { c.now = c.now.Add(d) }
func seqs(s plans.Summaries) map[string]uint64 {
	out := map[string]uint64{}
	for m, sum := range s.ByMachine {
		out[m] = sum.LastSeq
	}
	return out
}

func TestFeedListsOnceThenOnlyWhatChanged(t *testing.T) {
	st := &store{all: sums([]string{"c"}, map[string]uint64{"a": 1, "b": 2})}
	clk := &clock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	f := New(st, Options{Full: time.Hour, Overlap: 30 * time.Second, Stale: time.Minute, Clock: clk.Now})

	_, _, ok := f.Summaries(t.Context())
	require.False(t, ok, "nothing is known before the first look")

	require.NoError(t, f.Look(t.Context()))
	got, asOf, ok := f.Summaries(t.Context())
	require.True(t, ok)
	assert.Equal(t, clk.now, asOf)
	assert.Equal(t, map[string]uint64{"a": 1, "b": 2}, seqs(got))
	assert.True(t, got.Unpublished["c"])
	first := clk.now

	// b moved on, c published its first summary, a has a workflow whose
	// worker publishes none.
	clk.move(2 * time.Second)
	st.since = sums([]string{"a"}, map[string]uint64{"b": 5, "c": 7})
	require.NoError(t, f.Look(t.Context()))
	require.Equal(t, []time.Time{first.Add(-30 * time.Second)}, st.asked, "each look reaches back from the last one's start")
	assert.Equal(t, 1, st.fulls, "a look between full lists lists only the changes")
	next, asOf, ok := f.Summaries(t.Context())
	require.True(t, ok)
	assert.Equal(t, clk.now, asOf)
	assert.Equal(t, map[string]uint64{"b": 5, "c": 7}, seqs(next))
	assert.Equal(t, map[string]bool{"a": true}, next.Unpublished)
	assert.Equal(t, map[string]uint64{"a": 1, "b": 2}, seqs(got), "a picture handed out is never changed")

	// Once Full has passed, the whole list again: what ended is gone.
	clk.move(time.Hour)
	st.all = sums(nil, map[string]uint64{"b": 6})
	require.NoError(t, f.Look(t.Context()))
	assert.Equal(t, 2, st.fulls)
	last, _, _ := f.Summaries(t.Context())
	assert.Equal(t, map[string]uint64{"b": 6}, seqs(last))
	assert.Empty(t, last.Unpublished)
}

func TestFeedThatCannotLookGoesStale(t *testing.T) {
	st := &store{all: sums(nil, map[string]uint64{"a": 1})}
	clk := &clock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	f := New(st, Options{Full: time.Hour, Overlap: 30 * time.Second, Stale: 30 * time.Second, Clock: clk.Now})
	require.NoError(t, f.Look(t.Context()))
	good := clk.now

	st.err = errors.New("visibility unavailable")
	clk.move(20 * time.Second)
	require.Error(t, f.Look(t.Context()))
	got, asOf, ok := f.Summaries(t.Context())
	require.True(t, ok, "a look that failed leaves the last picture while it is recent")
	assert.Equal(t, good, asOf)
	assert.Equal(t, map[string]uint64{"a": 1}, seqs(got))

	clk.move(11 * time.Second)
	_, asOf, ok = f.Summaries(t.Context())
	assert.False(t, ok, "older than Stale, readers list for themselves")
	assert.Equal(t, good, asOf)

	// The next good look reaches back from the last good one, not from
	// the failed ones.
	st.err = nil
	st.asked = nil
	st.since = sums(nil, map[string]uint64{"a": 2})
	require.NoError(t, f.Look(t.Context()))
	assert.Equal(t, []time.Time{good.Add(-30 * time.Second)}, st.asked)
	got, _, ok = f.Summaries(t.Context())
	require.True(t, ok)
	assert.Equal(t, map[string]uint64{"a": 2}, seqs(got))
}

// keeper is a hand-written Keeper over a memory catalogue that counts the
// pictures handed to it whole.
type keeper struct {
	*catalogue.Memory
	whole, timeOnly int
}

func (k *keeper) KeepMachineFeed(ctx context.Context, asOf time.Time, body []byte) error {
	if body == nil {
		k.timeOnly++
	} else {
		k.whole++
	}
	return k.Memory.KeepMachineFeed(ctx, asOf, body)
}

// A feed with a keeper keeps each look's picture, whole only when it
// changed; another process reads it through Kept while it is recent.
func TestFeedKeptForOtherReaders(t *testing.T) {
	st := &store{all: sums([]string{"c"}, map[string]uint64{"a": 1, "b": 2})}
	clk := &clock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	k := &keeper{Memory: catalogue.NewMemory()}
	f := New(st, Options{Full: time.Hour, Clock: clk.Now, Keep: k})
	kept := Kept{Store: k, Stale: 30 * time.Second, Clock: clk.Now}

	_, _, ok := kept.Summaries(t.Context())
	require.False(t, ok, "nothing kept yet")
	require.NoError(t, f.Look(t.Context()))
	got, asOf, ok := kept.Summaries(t.Context())
	require.True(t, ok)
	assert.Equal(t, clk.now, asOf)
	assert.Equal(t, map[string]uint64{"a": 1, "b": 2}, seqs(got))
	assert.True(t, got.Unpublished["c"])

	clk.move(2 * time.Second)
	require.NoError(t, f.Look(t.Context())) // nothing changed
	assert.Equal(t, 1, k.whole)
	assert.Equal(t, 1, k.timeOnly, "an unchanged picture is kept by its time alone")
	_, asOf, _ = kept.Summaries(t.Context())
	assert.Equal(t, clk.now, asOf)

	clk.move(2 * time.Second)
	st.since = sums(nil, map[string]uint64{"b": 3})
	require.NoError(t, f.Look(t.Context()))
	assert.Equal(t, 2, k.whole)
	got, _, ok = kept.Summaries(t.Context())
	require.True(t, ok)
	assert.Equal(t, map[string]uint64{"a": 1, "b": 3}, seqs(got))

	clk.move(31 * time.Second)
	_, _, ok = kept.Summaries(t.Context())
	assert.False(t, ok, "a feed no worker kept up for Stale is not read")
}

func TestSlowLooksSpaceTheNext(t *testing.T) {
	for _, c := range []struct {
		name        string
		took, after time.Duration
	}{
		{"a quick look keeps the cadence", 200 * time.Millisecond, 1800 * time.Millisecond},
		{"a look of a moment", 0, 2 * time.Second},
		{"a look of half the cadence rests four times as long", time.Second, 4 * time.Second},
		{"a look longer than the cadence still rests", 2 * time.Second, 8 * time.Second},
		{"a long look rests no more than a third of the picture's freshness", 3 * time.Second, 10 * time.Second},
		{"a look longer than the cadence and the rest", 20 * time.Second, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.after, restAfter(2*time.Second, 30*time.Second, c.took))
		})
	}
}

// A machine workflow's summary may be up to meshapi.MachineChangedEvery
// newer than the change time a look lists it by; the default overlap
// reaches back past that with at least 20 s to spare for the store's lag
// and the clocks' skew, or a summary published at the end of a short push
// would be missed until the next full list.
func TestOverlapCoversTheChangeTimesStep(t *testing.T) {
	require.GreaterOrEqual(t, DefaultOverlap-meshapi.MachineChangedEvery, 20*time.Second)
}
