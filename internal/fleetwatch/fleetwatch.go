// Package fleetwatch keeps the fleet's picture (catalogue.HostState) current:
// the worker long-polls every host's report and records what changed, so
// that `starter status`, `machine list` and the fleet page read every host
// in one read of the catalogue instead of asking each host per refresh. At
// 10,000 machines that is one query per view instead of 10,000 HTTP calls.
//
// Each host has a goroutine of its own that long-polls its report
// (host.ReportWaiter, wait= Wait): a change answers at once and is recorded
// at once, and only when its revision moved, so a host that changes nothing
// costs no write. That a host answered unchanged is written for all such
// hosts together, once every FlushEvery, so that idle hosts cost one
// statement per flush rather than one each per poll. A host that fails is
// retried with a jittered, growing backoff and its error recorded (once per
// new message), so that a reader says why and since when.
//
// Several workers may each run a Watcher over one shared catalogue: every
// write keeps the newest revision and moves times forward only.
package fleetwatch

import (
	"context"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/backoff"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// Defaults of a Watcher, and how old a host's last answer may be before
// readers call it stale.
const (
	// DefaultWait is the long poll's wait=: near host.MaxReportWait, so an
	// idle host is asked about once a wait, and short of it by enough that
	// no proxy's timeout at the cap cuts a poll short.
	DefaultWait = 45 * time.Second
	// DefaultFlushEvery is how often the hosts heard unchanged are written,
	// all in one statement: how far behind "heard" may lag.
	DefaultFlushEvery = 5 * time.Second
	// DefaultPollEvery is how often a host that does not long-poll
	// (revision 0) is asked again.
	DefaultPollEvery = 5 * time.Second
	// StaleAfter is how long a host may go unheard before readers show it
	// as silent. A healthy idle host is heard once a wait (DefaultWait);
	// a hung one is cut off by its request's timeout (wait plus
	// host.DefaultTimeout) and its error recorded. So two missed polls
	// plus a flush, 2 × (45 s + 10 s) + 5 s, is a host or a watcher that
	// has gone quiet, not one between answers; a host that refuses or
	// times out is named at once by its error, without waiting for this.
	StaleAfter = 2*(DefaultWait+host.DefaultTimeout) + DefaultFlushEvery
	// retryFirst and retryMax bound the backoff of a failing host.
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// Store is where the picture is kept: the catalogue's writes of it.
type Store interface {
	RecordHostReport(ctx context.Context, machine string, rep mesh.Report, rev uint64, at time.Time) (bool, error)
	HostsHeard(ctx context.Context, machines []string, at time.Time) error
	RecordHostError(ctx context.Context, machine, msg string, at time.Time) error
}

// Watcher long-polls Hosts and keeps Store's picture of them current.
type Watcher struct {
	// Hosts are the hosts to watch, by machine.
	Hosts map[string]host.ReportWaiter
	Store Store
	// Wait, FlushEvery and PollEvery: zero is the default of each.
	Wait, FlushEvery, PollEvery time.Duration
	// Now is the clock of recorded times; nil is time.Now.
	Now func() time.Time
	// Retry is the clock of the backoff after an error; nil is the real
	// clock, jittered (each wait somewhere in its second half).
	Retry backoff.Clock
	Log   zerolog.Logger

	mu    sync.Mutex
	heard map[string]time.Time // heard unchanged since the last flush
	// While Run runs: its context, each host's watch's cancel, and the
	// watches to wait for; ended once Run stops taking new ones.
	ctx     context.Context
	cancels map[string]context.CancelFunc
	watches sync.WaitGroup
	ended   bool
}

// Set watches h as machine name from now on, in place of whatever watched
// name before (a machine that joined, or one whose host moved), without
// touching the other hosts' long polls.
func (w *Watcher) Set(name string, h host.ReportWaiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Hosts == nil {
		w.Hosts = map[string]host.ReportWaiter{}
	}
	w.Hosts[name] = h
	if w.ctx != nil {
		w.startLocked(name, h)
	}
}

// Drop stops watching machine name (one that left the mesh).
func (w *Watcher) Drop(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.Hosts, name)
	if cancel, ok := w.cancels[name]; ok {
		cancel()
		delete(w.cancels, name)
	}
}

// startLocked starts name's watch, ending the one before; w.mu is held.
func (w *Watcher) startLocked(name string, h host.ReportWaiter) {
	if w.ended {
		return
	}
	if cancel, ok := w.cancels[name]; ok {
		cancel()
	}
	ctx, cancel := context.WithCancel(w.ctx)
	w.cancels[name] = cancel
	w.watches.Go(func() { w.watch(ctx, name, h) })
}

// Run watches until ctx ends, then writes the last hosts heard and returns.
func (w *Watcher) Run(ctx context.Context) {
	w.mu.Lock()
	w.heard, w.ctx, w.cancels, w.ended = map[string]time.Time{}, ctx, map[string]context.CancelFunc{}, false
	for name, h := range w.Hosts {
		w.startLocked(name, h)
	}
	w.mu.Unlock()
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		t := time.NewTicker(or(w.FlushEvery, DefaultFlushEvery))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.flush(ctx)
			}
		}
	}()
	<-ctx.Done()
	w.mu.Lock()
	w.ended, w.ctx = true, nil
	w.mu.Unlock()
	w.watches.Wait()
	<-flushed
	w.flush(context.WithoutCancel(ctx))
}

// watch long-polls one host until ctx ends.
func (w *Watcher) watch(ctx context.Context, name string, h host.ReportWaiter) {
	log := w.Log.With().Str("machine", name).Logger()
	var rev uint64
	var last *mesh.Report
	lastErr := ""
	retry := w.backoff()
	for ctx.Err() == nil {
		wait := or(w.Wait, DefaultWait)
		if wait >= 10 {
			wait -= rand.N(wait / 10) // hosts that began together drift apart
		}
		rep, newRev, err := h.WaitReport(ctx, rev, wait)
		at := w.now()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				log.Warn().Err(err).Msg("the host does not answer its report")
				if serr := w.Store.RecordHostError(ctx, name, msg, at); serr != nil {
					log.Error().Err(serr).Msg("recording the host's error failed")
				}
			}
			_ = retry.Wait(ctx)
			continue
		}
		if lastErr != "" {
			log.Info().Msg("the host answers again")
		}
		lastErr, retry = "", w.backoff()
		changed := last == nil || (newRev == 0 && !reflect.DeepEqual(*last, rep)) || (newRev != 0 && newRev != rev)
		if changed {
			if _, serr := w.Store.RecordHostReport(ctx, name, rep, newRev, at); serr != nil {
				log.Error().Err(serr).Msg("recording the host's report failed; asking again")
				_ = retry.Wait(ctx)
				continue
			}
			last, rev = &rep, newRev
		} else {
			w.markHeard(name, at)
		}
		if newRev == 0 {
			// No long poll: the host answered at once.
			t := time.NewTimer(or(w.PollEvery, DefaultPollEvery))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// markHeard notes that name answered unchanged at at, for the next flush;
// the batch is written at the earliest time in it, so no host is said to
// have been heard later than it was.
func (w *Watcher) markHeard(name string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.heard[name]; !ok {
		w.heard[name] = at
	}
}

// flush writes the hosts heard since the last flush in one statement.
func (w *Watcher) flush(ctx context.Context) {
	w.mu.Lock()
	heard := w.heard
	w.heard = map[string]time.Time{}
	w.mu.Unlock()
	if len(heard) == 0 {
		return
	}
	names := make([]string, 0, len(heard))
	var at time.Time
	for name, t := range heard {
		names = append(names, name)
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if err := w.Store.HostsHeard(ctx, names, at); err != nil {
		w.Log.Error().Err(err).Int("hosts", len(names)).Msg("recording the hosts heard failed")
	}
}

func (w *Watcher) backoff() *backoff.Backoff {
	b := backoff.New(retryFirst, retryMax)
	b.Clock = w.Retry
	if b.Clock == nil {
		b.Clock = jittered{}
	}
	return b
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// jittered is the real clock waiting somewhere in the second half of each
// wait, so that hosts that failed together (a network blip) are not all
// asked again at the same moment.
type jittered struct{}

func (jittered) After(d time.Duration) <-chan time.Time {
	if d > 1 {
		d = d/2 + rand.N(d/2)
	}
	return time.After(d)
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
