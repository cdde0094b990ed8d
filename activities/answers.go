package activities

import (
	"context"
	"sync"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// answerBundles sends the answers of a worker's pushes to where they go
// (a plan or its relay) in bundles: one signal at a time to each place,
// carrying every answer that came while the one before was sent, up to
// meshapi.AnswerBundle. A tier's pushes that end together then cost its
// plan or relay a few signals rather than one each, all at once: at 10,000
// machines a worker's thousand answers at once outran the dev server until
// its store failed every query. An answer that comes when nothing is being
// sent to its place goes at once, alone, so a lone push waits no longer
// than it did.
type answerBundles struct {
	// send signals one bundle to the workflow to.
	send func(ctx context.Context, to string, b meshapi.PushResults) error
	mu   sync.Mutex
	// places holds, for each place a bundle is being sent to, the answers
	// waiting for the next; a place with nothing being sent has none.
	places map[string][]waitingAnswer
}

// waitingAnswer is one answer and where its push hears how its bundle went.
type waitingAnswer struct {
	r    meshapi.PushResult
	sent chan error
}

// newAnswerBundles sends bundles by send.
func newAnswerBundles(send func(ctx context.Context, to string, b meshapi.PushResults) error) *answerBundles {
	return &answerBundles{send: send, places: map[string][]waitingAnswer{}}
}

// Answer sends r with the answers going to the same place, and returns how
// its bundle's signal went; or ctx's error when ctx ends first (the answer
// may still go: a push's retry answers again, which its plan ignores).
func (b *answerBundles) Answer(ctx context.Context, r meshapi.PushResult) error {
	w := waitingAnswer{r: r, sent: make(chan error, 1)}
	to := r.AnswerTo()
	b.mu.Lock()
	waiting, sending := b.places[to]
	b.places[to] = append(waiting, w)
	if !sending {
		go b.sendAll(to)
	}
	b.mu.Unlock()
	select {
	case err := <-w.sent:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendAll sends the answers waiting for to, a bundle at a time, until none
// is left; then the place has nothing being sent, and the next answer to it
// starts sendAll again. The bundle's signal does not end with the first
// push that stops waiting for it.
func (b *answerBundles) sendAll(to string) {
	for {
		b.mu.Lock()
		waiting := b.places[to]
		if len(waiting) == 0 {
			delete(b.places, to)
			b.mu.Unlock()
			return
		}
		n := min(len(waiting), meshapi.AnswerBundle)
		bundle := waiting[:n:n]
		b.places[to] = waiting[n:]
		b.mu.Unlock()

		rs := meshapi.PushResults{Results: make([]meshapi.PushResult, n)}
		for i, w := range bundle {
			rs.Results[i] = w.r
		}
		err := b.send(context.Background(), to, rs)
		for _, w := range bundle {
			w.sent <- err
		}
	}
}
