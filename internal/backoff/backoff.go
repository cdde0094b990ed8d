// Package backoff spaces out the attempts of a call that may succeed if made
// again: a server that is starting, a query dropped under load, a version the
// server does not know yet. Each wait is twice the one before, up to a cap,
// so that a service coming back is found quickly and one staying down is not
// hammered; a wait ends early when its context does, so that a shutdown is
// never held up by a retry loop.
//
// Backoff only waits. When to give up (after so many attempts, once the wait
// grows past a bound, on an error no retry can fix) stays with the loop that
// calls it, because that is what differs from one loop to the next.
package backoff

import (
	"context"
	"math"
	"time"
)

// Clock is the time a Backoff waits on. It is an interface so that a test
// can fire the waits itself instead of sleeping through them.
type Clock interface {
	// After is time.After: a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// realClock is the clock of a Backoff whose Clock is nil.
type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Backoff is the waits of one retry loop: make one with New for each loop,
// since it remembers how long the next wait is.
type Backoff struct {
	// Clock is what Wait waits on; nil is the real clock.
	Clock Clock

	next, maxWait time.Duration
}

// New is a Backoff whose first wait is initial and whose waits then double
// up to maxWait; maxWait 0 lets them double without a cap, for a loop that
// gives up on its own before they grow long.
func New(initial, maxWait time.Duration) *Backoff {
	return &Backoff{next: initial, maxWait: maxWait}
}

// Next is how long the next Wait will wait, for a loop that gives up once
// the waits grow too long.
func (b *Backoff) Next() time.Duration { return b.next }

// Wait waits Next, and doubles the wait after it (up to the cap). It
// returns ctx.Err() if ctx ends first, and nil otherwise.
func (b *Backoff) Wait(ctx context.Context) error {
	d := b.next
	b.next = 2 * d
	if b.next < d { // overflowed: as long as a Duration can be
		b.next = math.MaxInt64
	}
	if b.maxWait > 0 {
		b.next = min(b.next, b.maxWait)
	}
	clock := b.Clock
	if clock == nil {
		clock = realClock{}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-clock.After(d):
		return nil
	}
}
