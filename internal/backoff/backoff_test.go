package backoff_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/backoff"
)

// fakeClock records the waits asked of it. With fire set, each wait has
// already passed when it is asked for; without, none ever passes.
type fakeClock struct {
	fire  bool
	waits []time.Duration
	asked chan struct{} // receives once per wait asked for, when not nil
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	if c.fire {
		ch <- time.Time{}
	}
	if c.asked != nil {
		c.asked <- struct{}{}
	}
	return ch
}

func TestWaits(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name             string
		initial, maxWait time.Duration
		want             []time.Duration
	}{
		{"doubles without a cap", 100 * ms, 0, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms}},
		{"stops at the cap", 100 * ms, 2 * time.Second, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2 * time.Second, 2 * time.Second}},
		{"cap not a power of two of the first", 300 * ms, time.Second, []time.Duration{300 * ms, 600 * ms, time.Second, time.Second}},
		{"first wait above the cap is kept once", 3 * time.Second, time.Second, []time.Duration{3 * time.Second, time.Second, time.Second}},
		{"no first wait", 0, time.Second, []time.Duration{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{fire: true}
			b := backoff.New(tc.initial, tc.maxWait)
			b.Clock = clock
			var next []time.Duration
			for range tc.want {
				next = append(next, b.Next())
				if err := b.Wait(context.Background()); err != nil {
					t.Fatalf("Wait: %v", err)
				}
			}
			if !slices.Equal(clock.waits, tc.want) {
				t.Errorf("waited %v, want %v", clock.waits, tc.want)
			}
			if !slices.Equal(next, tc.want) {
				t.Errorf("Next said %v, want %v", next, tc.want)
			}
		})
	}
}

func TestWaitsSaturate(t *testing.T) {
	b := backoff.New(time.Duration(math.MaxInt64/2+1), 0)
	b.Clock = &fakeClock{fire: true}
	for range 3 {
		if err := b.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if b.Next() <= 0 {
			t.Fatalf("Next = %v after doubling a long wait; want the longest Duration", b.Next())
		}
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	t.Run("done before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		b := backoff.New(time.Hour, 0)
		b.Clock = &fakeClock{}
		if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
	})
	t.Run("done while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		clock := &fakeClock{asked: make(chan struct{})}
		b := backoff.New(time.Hour, 0)
		b.Clock = clock
		done := make(chan error)
		go func() { done <- b.Wait(ctx) }()
		<-clock.asked // Wait is waiting on the clock, which never fires
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		b := backoff.New(time.Hour, 0)
		b.Clock = &fakeClock{}
		if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestRealClock(t *testing.T) {
	b := backoff.New(time.Nanosecond, 0)
	if err := b.Wait(context.Background()); err != nil {
		t.Errorf("Wait on the real clock: %v", err)
	}
}
