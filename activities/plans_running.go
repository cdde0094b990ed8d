package activities

import (
	"context"
	"sync"
	"time"
)

// runningFresh is how long one answer of whether a plan runs serves the
// pushes that ask after it. A plan that runs now ran a second ago: the
// question is for a plan terminated under pushes that waited, and a push
// handed over within PlanFresh does not ask at all.
const runningFresh = time.Second

// runningCache shares the answer to "does this plan still run" among one
// worker's pushes: concurrent asks about a plan share one call, and its
// answer serves the asks of the next runningFresh. Without it, the pushes
// of a tier of thousands that waited past PlanFresh each describe the
// plan, thousands of calls to one workflow at once, which the bench saw
// time out at ten thousand machines. An answer that failed is not kept.
type runningCache struct {
	ask func(ctx context.Context, plan string) (string, bool, error)
	now func() time.Time

	mu      sync.Mutex
	entries map[string]*runningEntry
}

// runningEntry is one ask: in flight until done is closed, then its
// answer, from at.
type runningEntry struct {
	done    chan struct{}
	at      time.Time
	status  string
	running bool
	err     error
}

func newRunningCache(ask func(ctx context.Context, plan string) (string, bool, error)) *runningCache {
	return &runningCache{ask: ask, now: time.Now, entries: map[string]*runningEntry{}}
}

// Running says whether plan runs, asking only when no ask of it is in
// flight or fresh.
func (c *runningCache) Running(ctx context.Context, plan string) (string, bool, error) {
	c.mu.Lock()
	e, ok := c.entries[plan]
	if ok && !c.stale(e) {
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return e.status, e.running, e.err
	}
	e = &runningEntry{done: make(chan struct{})}
	c.entries[plan] = e
	c.prune()
	c.mu.Unlock()

	status, running, err := c.ask(ctx, plan)
	c.mu.Lock()
	defer c.mu.Unlock()
	e.status, e.running, e.err, e.at = status, running, err, c.now()
	close(e.done)
	return status, running, err
}

// stale says, under mu, whether e can no longer serve an ask: it has
// ended, and failed or is older than runningFresh. One in flight is
// shared.
func (c *runningCache) stale(e *runningEntry) bool {
	select {
	case <-e.done:
		return e.err != nil || c.now().Sub(e.at) > runningFresh
	default:
		return false
	}
}

// prune drops, under mu, every entry that can no longer serve, so that the
// cache holds only the plans asked about in the last runningFresh.
func (c *runningCache) prune() {
	for plan, e := range c.entries {
		if c.stale(e) {
			delete(c.entries, plan)
		}
	}
}
