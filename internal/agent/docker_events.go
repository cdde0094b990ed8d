package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/backoff"
)

// Following the engine: each runtime holds one stream of the engine's
// /events, filtered to the containers labelled for its machine, and wakes
// whoever follows a container (follow) when the engine says something
// happened to it: it started, died, was killed, stopped, restarted,
// removed, ran out of memory, or changed health. The follower then
// inspects the container, as it always did; an event only says when to
// look, never what is true, so an event lost, doubled or out of order
// cannot make the runtime report a wrong state.
//
// When the stream breaks (the engine restarted, the connection dropped)
// the runtime opens it again after a wait that doubles from
// eventsRetryFirst to eventsRetryMost, and once it is open again wakes
// every follower: whatever happened while it was down (the engine sends
// no event twice) is seen by that inspection.

// dockerSafetyPoll is how often a followed container is inspected when the
// engine says nothing about it. Events end a wait as soon as something
// happens; this slow look is there so that nothing can hang a wait for
// ever: an event the engine dropped (its per-subscriber buffer is
// bounded), a filter that missed one, an engine or a compatible service
// (Podman's) whose events differ. It also carries the reviver, whose
// waits run on the follower's timer (reviver.due), between events.
const dockerSafetyPoll = 5 * time.Second

// Waits before the event stream is opened again after it broke.
const (
	eventsRetryFirst = 100 * time.Millisecond
	eventsRetryMost  = 5 * time.Second
)

// engineEvent is one message of the engine's event stream, with what the
// runtime reads of it.
type engineEvent struct {
	Type   string `json:"Type"`
	Action string `json:"Action"`
	Actor  struct {
		ID string `json:"ID"`
	} `json:"Actor"`
}

// eventFeed fans one event stream out to the followers of containers,
// by container ID. The stream is opened when the first follower watches,
// and closed by close.
type eventFeed struct {
	// open opens the stream: JSON messages, one after another.
	open func(ctx context.Context) (io.ReadCloser, error)
	// retryFirst and retryMost bound the wait before opening it again.
	retryFirst, retryMost time.Duration

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
	closed   bool
	cancel   context.CancelFunc
	done     chan struct{}
}

func newEventFeed(open func(ctx context.Context) (io.ReadCloser, error)) *eventFeed {
	return &eventFeed{open: open, retryFirst: eventsRetryFirst, retryMost: eventsRetryMost,
		watchers: map[string]map[chan struct{}]struct{}{}}
}

// eventsPath is the engine's event stream of machine's containers.
func eventsPath(machine string) string {
	f, _ := json.Marshal(map[string][]string{"type": {"container"}, "label": {labelMachine + "=" + machine}})
	return "/events?filters=" + url.QueryEscape(string(f))
}

// openEvents opens the engine's event stream of this runtime's machine.
func (r *DockerRuntime) openEvents(ctx context.Context) (io.ReadCloser, error) {
	resp, err := r.request(ctx, http.MethodGet, eventsPath(r.machine), nil)
	if err != nil {
		return nil, fmt.Errorf("follow the engine's events: %w", err)
	}
	return resp.Body, nil
}

// watch returns a channel that receives when the engine says something
// happened to container id (or may have, the stream having broken), and
// the func that stops the watch. A wake not yet taken is not doubled: the
// follower inspects once for any number of events.
func (f *eventFeed) watch(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watchers[id] == nil {
		f.watchers[id] = map[chan struct{}]struct{}{}
	}
	f.watchers[id][ch] = struct{}{}
	if !f.closed && f.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f.cancel, f.done = cancel, make(chan struct{})
		go f.run(ctx, f.done)
	}
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.watchers[id], ch)
		if len(f.watchers[id]) == 0 {
			delete(f.watchers, id)
		}
	}
}

// close ends the stream and waits, within ctx, for it to be closed.
func (f *eventFeed) close(ctx context.Context) error {
	f.mu.Lock()
	f.closed = true
	cancel, done := f.cancel, f.done
	f.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("runtime docker: close the event stream: %w", ctx.Err())
	}
}

// run keeps the stream open until ctx ends, passing each event on.
func (f *eventFeed) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	bo := backoff.New(f.retryFirst, f.retryMost)
	for ctx.Err() == nil {
		body, err := f.open(ctx)
		if err == nil {
			// Whatever happened while the stream was down is seen by
			// looking again at every container followed.
			f.wakeAll()
			if f.read(body) {
				bo = backoff.New(f.retryFirst, f.retryMost)
			}
			body.Close()
		}
		_ = bo.Wait(ctx) // ends early with ctx, which ends the loop
	}
}

// read passes on the stream's events until it ends, reporting whether it
// carried any: a stream that breaks at once does not reset the wait.
func (f *eventFeed) read(body io.Reader) bool {
	dec := json.NewDecoder(body)
	carried := false
	for {
		var ev engineEvent
		if err := dec.Decode(&ev); err != nil {
			return carried
		}
		carried = true
		if ev.Type != "container" || strings.HasPrefix(ev.Action, "exec_") {
			// An exec probe's exec_create, exec_start and exec_die say
			// nothing of the container's own state.
			continue
		}
		f.wake(ev.Actor.ID)
	}
}

// wake signals the watchers of container id.
func (f *eventFeed) wake(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.watchers[id] {
		signal(ch)
	}
}

// wakeAll signals every watcher.
func (f *eventFeed) wakeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, chs := range f.watchers {
		for ch := range chs {
			signal(ch)
		}
	}
}

// signal sends on ch unless a signal is already waiting there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
