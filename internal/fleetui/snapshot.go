package fleetui

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/window"
)

// Snapshot is the fleet as one read found it: every source read at once,
// each with why it could not be read. The page shows one snapshot, and
// says when it was read.
type Snapshot struct {
	// ReadAt is when the read started; Took how long it took.
	ReadAt time.Time
	Took   time.Duration

	Status machines.Status
	// TemporalError is why Temporal could not be asked (the machine
	// workflows, plans): the hosts' part of Status is still there.
	TemporalError string

	Freezes      []mesh.Freeze
	FreezesError string

	Rejected      map[string]mesh.Rejection
	RejectedError string

	Plans      []Plan
	PlansError string
	Recent     []plans.Summary

	Windows Windows
}

// Windows is the deployment windows at ReadAt.
type Windows struct {
	// Set are the windows of the mesh config; none: plans push any time.
	Set window.Set
	// Open is whether plans may push now.
	Open bool
	// Deny is the deny window that holds, when one does.
	Deny *window.Window
	// OpensAt is when they open, while they are closed; Error why that
	// could not be told.
	OpensAt time.Time
	Error   string
}

// recentPlans is how many of the newest plans the page lists beside those
// in flight.
const recentPlans = 8

// readTimeout bounds one read of every source. Hosts come from the fleet
// picture in one catalogue read (or, without a catalogue, answer within
// machines.HostCheckTimeout each) and workflow queries within
// machines.QueryTimeout; this is the rest of the margin.
const readTimeout = 30 * time.Second

// read reads every source at once into a Snapshot, started at now by
// clock.
func read(ctx context.Context, src Source, windows window.Set, clock func() time.Time) *Snapshot {
	now := clock()
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	s := &Snapshot{ReadAt: now, Windows: windowsAt(windows, now)}
	var wg sync.WaitGroup
	wg.Go(func() {
		st, err := src.Status(ctx)
		s.Status = st
		if err != nil {
			s.TemporalError = err.Error()
		}
		rej, err := src.Rejected(ctx, runningDigests(st))
		s.Rejected = rej
		if err != nil {
			s.RejectedError = err.Error()
		}
	})
	wg.Go(func() {
		fs, err := src.Freezes(ctx)
		s.Freezes = fs
		if err != nil {
			s.FreezesError = err.Error()
		}
	})
	wg.Go(func() {
		ps, err := src.Plans(ctx)
		s.Plans = ps
		if err != nil {
			s.PlansError = err.Error()
			return
		}
		// The recent list is a nicety: a plan list that works once works
		// twice, and its failure says nothing new.
		s.Recent, _ = src.Recent(ctx, recentPlans)
	})
	wg.Wait()
	s.Status.SetFreezes(s.Freezes, nil)
	s.Took = max(0, clock().Sub(now))
	return s
}

// windowsAt is the windows' state at now.
func windowsAt(set window.Set, now time.Time) Windows {
	w := Windows{Set: set, Open: true}
	if len(set) == 0 {
		return w
	}
	w.Open, w.Deny = set.Allowed(now)
	if !w.Open {
		at, err := set.OpensAt(now)
		if err != nil {
			w.Error = err.Error()
		} else {
			w.OpensAt = at.UTC()
		}
	}
	return w
}

// cache holds the latest Snapshot and reads anew, at most one read at a
// time, once it is older than the interval and a page asks: the fleet is
// read while someone looks, and every viewer shares one read. A read of a
// large fleet asks every host and machine workflow, so the interval grows
// with how long the last read took.
type cache struct {
	src Source
	// mesh gives the windows of the config in force at each read.
	mesh     config.Source
	interval time.Duration
	// wait is how long a page waits for a read in flight before it shows
	// the snapshot it has (saying it is stale when it is).
	wait  time.Duration
	clock func() time.Time
	log   zerolog.Logger

	mu      sync.Mutex
	cur     *Snapshot
	reading chan struct{} // closed when the read in flight ends; nil when none
	since   time.Time     // when the read in flight started
}

// due is the age past which the snapshot is read anew: the interval, or
// twice the last read's duration when that is longer.
func (c *cache) due(s *Snapshot) time.Duration {
	return max(c.interval, 2*s.Took)
}

// get returns the newest snapshot, starting a read when it is due and
// waiting up to c.wait for one in flight. Before the first read has ended
// it waits for it as long as ctx allows, and returns nil if ctx ends
// first. readingSince is when the read still in flight started (zero when
// none is).
func (c *cache) get(ctx context.Context) (s *Snapshot, readingSince time.Time) {
	c.mu.Lock()
	now := c.clock()
	if c.cur != nil && now.Sub(c.cur.ReadAt) < c.due(c.cur) {
		s = c.cur
		c.mu.Unlock()
		return s, time.Time{}
	}
	if c.reading == nil {
		c.reading, c.since = make(chan struct{}), now
		go c.read(c.reading)
	}
	done, first := c.reading, c.cur == nil
	c.mu.Unlock()

	var timeout <-chan time.Time
	if !first {
		t := time.NewTimer(c.wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-done:
	case <-timeout:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading != nil {
		readingSince = c.since
	}
	return c.cur, readingSince
}

// read reads every source, detached from the page that asked (another
// page will want the answer), and stores the snapshot.
func (c *cache) read(done chan struct{}) {
	s := read(context.Background(), c.src, c.mesh.Current().DeployWindows(), c.clock)
	c.mu.Lock()
	prev := c.cur
	c.cur, c.reading = s, nil
	c.mu.Unlock()
	close(done)
	c.log.Debug().Str("took", s.Took.String()).Int("machines", len(s.Status.Machines)).Int("plans", len(s.Plans)).Msg("fleet page: fleet read")
	// Said once when it starts, not at every read while it lasts.
	if s.TemporalError != "" && (prev == nil || prev.TemporalError == "") {
		c.log.Warn().Str("error", s.TemporalError).Msg("fleet page: Temporal unreachable; the page shows what the hosts said")
	}
}
