// Package machinefeed keeps every machine workflow's summary current,
// reading from the visibility store only the workflows that published a
// change since its last look, and every workflow only now and then. The
// worker runs one and keeps its picture in the catalogue, where the fleet
// page and `starter status` read it (Kept), so that no reader waits for a
// list of every machine workflow: at ten thousand machines such a list is
// ten pages and seconds of the store's time, where a look at what changed
// is a handful of rows, or none while nothing moves.
package machinefeed

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/plans"
)

// Store is where the feed reads the summaries: the visibility store
// (Visibility), or a test's fake.
type Store interface {
	// All is every running machine workflow's summary.
	All(ctx context.Context) (plans.Summaries, error)
	// Since is those of the running machine workflows that published one
	// at or after t.
	Since(ctx context.Context, t time.Time) (plans.Summaries, error)
}

// Defaults of Options.
const (
	// DefaultEvery is the fleet page's own refresh: a viewer sees a
	// change within about one look and one refresh.
	DefaultEvery = 2 * time.Second
	// DefaultFull bounds how long a workflow the looks cannot see stays
	// as it was last read: one that ended (a retired machine, or one
	// terminated by hand) or one still run by a worker that does not set
	// the change time yet.
	DefaultFull = 5 * time.Minute
	// DefaultOverlap is how far before the last look each look reaches
	// back: a summary may be up to meshapi.MachineChangedEvery newer than
	// its change time, the store records a change a moment after the
	// workflow makes it, and the workflow's clock (the server's) may be
	// behind this one. 30 s leaves 20 s for the last two.
	DefaultOverlap = 30 * time.Second
	// DefaultStale is how old the last good look may be before Summaries
	// says the feed cannot be trusted and a reader lists for itself.
	DefaultStale = 30 * time.Second
)

// lookTimeout bounds one look: a store that hangs is a look that failed.
const lookTimeout = 30 * time.Second

// restPerLook is how many times as long as a look took Run waits before
// the next, when that is longer than Options.Every: during a plan of
// thousands of machines every look reads thousands of changed rows, and a
// dev server's visibility store shares one database with the history the
// plan writes, so the feed takes at most a fifth of the store's time, and
// its picture ages a little while the fleet moves. The rest never passes a
// third of Options.Stale, so that a look of up to that long still keeps
// the picture fresh: a stale one sends every reader to list the store.
const restPerLook = 4

// Options tune a Feed; the zero value takes the defaults.
type Options struct {
	Every, Full, Overlap, Stale time.Duration
	// Clock is the time (default time.Now).
	Clock func() time.Time
	Log   zerolog.Logger
	// Keep, when set, is where each look's picture is kept for other
	// processes (the worker's catalogue, which `starter status` reads
	// through Kept).
	Keep Keeper
}

// Keeper keeps a feed's picture for other processes:
// catalogue.Catalogue.
type Keeper interface {
	// KeepMachineFeed keeps body (the picture's JSON) as of asOf; a nil
	// body moves asOf alone.
	KeepMachineFeed(ctx context.Context, asOf time.Time, body []byte) error
	// MachineFeed is what was kept last.
	MachineFeed(ctx context.Context) (asOf time.Time, body []byte, ok bool, err error)
}

// Feed is the current picture of every machine workflow's summary. Run
// keeps it; Summaries reads it.
type Feed struct {
	store Store
	o     Options

	mu   sync.Mutex
	sums plans.Summaries // never changed in place: a look that changes it makes a new one
	// asOf is when the last good look began: every change the store had
	// recorded by then is in sums.
	asOf time.Time
	// full is when the last full list began.
	full time.Time
	// changes counts the pictures sums has held; kept is the count of
	// the one Options.Keep has, so that an unchanged picture is kept by
	// its time alone.
	changes, kept int
}

// New is a feed of store, empty until Run has read every summary once.
func New(store Store, o Options) *Feed {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Full <= 0 {
		o.Full = DefaultFull
	}
	if o.Overlap <= 0 {
		o.Overlap = DefaultOverlap
	}
	if o.Stale <= 0 {
		o.Stale = DefaultStale
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Feed{store: store, o: o}
}

// Summaries is the picture and when it was read (when the look that last
// brought it up to date began). ok is false before the first full list, or
// when no look has succeeded for longer than Options.Stale: the reader
// then lists the store itself, and says what that finds. The maps must not
// be changed.
func (f *Feed) Summaries(context.Context) (sums plans.Summaries, asOf time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sums.ByMachine == nil || f.o.Clock().Sub(f.asOf) > f.o.Stale {
		return plans.Summaries{}, f.asOf, false
	}
	return f.sums, f.asOf, true
}

// Run looks every Options.Every until ctx ends: the whole list first and
// every Options.Full, and in between the changes since the last good look
// (less Options.Overlap). A slow look spaces the next (restPerLook). A
// look that fails is logged, once until one succeeds again, and tried
// again at the next.
func (f *Feed) Run(ctx context.Context) {
	failing := false
	for {
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		began := time.Now()
		err := f.Look(lctx)
		took := time.Since(began)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			f.o.Log.Warn().Err(err).Msg("the machine workflows' feed is behind; the fleet page and status list the workflows themselves until it catches up")
		case err == nil && failing:
			f.o.Log.Info().Msg("the machine workflows' feed caught up")
		}
		failing = err != nil
		t := time.NewTimer(restAfter(f.o.Every, f.o.Stale, took))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// restAfter is how long Run waits after a look that took took: to the
// next Options.Every from the look's start, or restPerLook times took if
// that is longer, up to a third of stale.
func restAfter(every, stale, took time.Duration) time.Duration {
	return max(every-took, min(restPerLook*took, stale/3))
}

// Look brings the picture up to date once: the whole list when none was
// read for Options.Full, else the changes since the last good look.
func (f *Feed) Look(ctx context.Context) error {
	f.mu.Lock()
	cur, last, full := f.sums, f.asOf, f.full
	f.mu.Unlock()

	began := f.o.Clock()
	if cur.ByMachine == nil || began.Sub(full) >= f.o.Full {
		all, err := f.store.All(ctx)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.sums, f.asOf, f.full = all, began, began
		f.changes++
		f.mu.Unlock()
		return f.keep(ctx)
	}
	changed, err := f.store.Since(ctx, last.Add(-f.o.Overlap))
	if err != nil {
		return err
	}
	next, moved := cur, len(changed.ByMachine)+len(changed.Unpublished) > 0
	if moved {
		next = plans.Summaries{ByMachine: maps.Clone(cur.ByMachine), Unpublished: maps.Clone(cur.Unpublished)}
		for m, s := range changed.ByMachine {
			next.ByMachine[m] = s
			delete(next.Unpublished, m)
		}
		for m := range changed.Unpublished {
			next.Unpublished[m] = true
			delete(next.ByMachine, m)
		}
	}
	f.mu.Lock()
	f.sums, f.asOf = next, began
	if moved {
		f.changes++
	}
	f.mu.Unlock()
	return f.keep(ctx)
}

// keep hands the picture to Options.Keep: whole when it changed since it
// was last kept, else its time alone.
func (f *Feed) keep(ctx context.Context) error {
	if f.o.Keep == nil {
		return nil
	}
	f.mu.Lock()
	sums, asOf, changes, kept := f.sums, f.asOf, f.changes, f.kept
	f.mu.Unlock()
	var body []byte
	if changes != kept {
		var err error
		if body, err = json.Marshal(sums); err != nil {
			return fmt.Errorf("keep the machine workflows' feed: %w", err)
		}
	}
	if err := f.o.Keep.KeepMachineFeed(ctx, asOf, body); err != nil {
		return fmt.Errorf("keep the machine workflows' feed: %w", err)
	}
	f.mu.Lock()
	f.kept = changes
	f.mu.Unlock()
	return nil
}

// Kept is a feed a worker keeps (Options.Keep), as another process reads
// it: `starter status` reads the machine workflows from it while it is
// recent, rather than listing every one.
type Kept struct {
	Store Keeper
	// Stale is how old it may be (default DefaultStale); Clock is the
	// time (default time.Now).
	Stale time.Duration
	Clock func() time.Time
}

// Summaries implements machines.Feed: ok is false when no feed is kept,
// when it is older than Stale (no worker keeps it up), or when it cannot
// be read.
func (k Kept) Summaries(ctx context.Context) (plans.Summaries, time.Time, bool) {
	asOf, body, ok, err := k.Store.MachineFeed(ctx)
	now := time.Now()
	if k.Clock != nil {
		now = k.Clock()
	}
	if err != nil || !ok || now.Sub(asOf) > cmp.Or(k.Stale, DefaultStale) {
		return plans.Summaries{}, asOf, false
	}
	var sums plans.Summaries
	if json.Unmarshal(body, &sums) != nil || sums.ByMachine == nil {
		return plans.Summaries{}, asOf, false
	}
	return sums, asOf, true
}
