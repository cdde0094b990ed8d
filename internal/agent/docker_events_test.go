package agent

import (
	"context"
	"errors"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeStreams is an event stream opener for eventFeed: each open hands the
// test the stream's writing end (on opened), or fails while fail says so.
type fakeStreams struct {
	opened chan *io.PipeWriter
	fail   chan error
}

// newFakeStreams hands each stream the feed opens to the test's next, and
// the feed's open returns only once the test has taken it: so the
// followers a test starts before it takes the stream are all there when
// the feed wakes every follower at the open.
func newFakeStreams() *fakeStreams {
	return &fakeStreams{opened: make(chan *io.PipeWriter), fail: make(chan error, 4)}
}

func (s *fakeStreams) open(ctx context.Context) (io.ReadCloser, error) {
	select {
	case err := <-s.fail:
		return nil, err
	default:
	}
	pr, pw := io.Pipe()
	go func() {
		// As the engine's answer, the stream ends with the request.
		<-ctx.Done()
		pw.CloseWithError(ctx.Err())
	}()
	select {
	case s.opened <- pw:
		return pr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// next is the writing end of the stream the feed opens next.
func (s *fakeStreams) next(t *testing.T) *io.PipeWriter {
	t.Helper()
	select {
	case pw := <-s.opened:
		return pw
	case <-time.After(waitLimit):
		t.Fatal("the feed never opened its stream")
		return nil
	}
}

// send writes events to the stream, as the engine does: one JSON message
// a line.
func send(t *testing.T, pw *io.PipeWriter, lines ...string) {
	t.Helper()
	for _, l := range lines {
		_, err := io.WriteString(pw, l+"\n")
		require.NoError(t, err)
	}
}

func woken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("never woken: %s", what)
	}
}

func notWoken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("woken: %s", what)
	default:
	}
}

// The engine's events, as Docker 20.10 sends them, each with the
// container it wakes ("" for none).
var engineEvents = []struct {
	line, wakes string
}{
	{`{"status":"die","id":"c1","from":"img","Type":"container","Action":"die","Actor":{"ID":"c1","Attributes":{"exitCode":"137","io.meshroll.machine":"m"}},"scope":"local","time":1,"timeNano":1}`, "c1"},
	{`{"status":"health_status: unhealthy","id":"c1","Type":"container","Action":"health_status: unhealthy","Actor":{"ID":"c1"}}`, "c1"},
	{`{"Type":"container","Action":"oom","Actor":{"ID":"c1"}}`, "c1"},
	{`{"Type":"container","Action":"destroy","Actor":{"ID":"c1"}}`, "c1"},
	{`{"status":"exec_die","id":"c2","Type":"container","Action":"exec_die","Actor":{"ID":"c2","Attributes":{"execID":"x1","exitCode":"0"}}}`, ""},
	{`{"status":"exec_start: check","id":"c2","Type":"container","Action":"exec_start: check","Actor":{"ID":"c2"}}`, ""},
	{`{"Type":"network","Action":"connect","Actor":{"ID":"c2"}}`, ""},
	{`{"Type":"container","Action":"start","Actor":{"ID":"c3"}}`, ""},
}

// Each event wakes the followers of its container and no one else; an
// exec probe's events and other objects' wake no one.
func TestEventFeedWakesTheFollowersOfItsContainer(t *testing.T) {
	for _, tc := range engineEvents {
		t.Run(tc.line[:40], func(t *testing.T) {
			s := newFakeStreams()
			f := newEventFeed(s.open)
			w1, stop1 := f.watch("c1")
			defer stop1()
			w1b, stop1b := f.watch("c1")
			defer stop1b()
			w2, stop2 := f.watch("c2")
			defer stop2()
			pw := s.next(t)
			for _, w := range []<-chan struct{}{w1, w1b, w2} {
				woken(t, w, "every follower looks once the stream is open")
			}
			marker, stopMarker := f.watch("marker")
			defer stopMarker()
			// The events are read in order: once the marker's wakes, the
			// event before it has been passed on.
			send(t, pw, tc.line, `{"Type":"container","Action":"die","Actor":{"ID":"marker"}}`)
			woken(t, marker, "the marker")
			if tc.wakes == "c1" {
				woken(t, w1, "c1's follower")
				woken(t, w1b, "c1's second follower")
			} else {
				notWoken(t, w1, "c1's follower")
			}
			notWoken(t, w2, "c2's follower")
			require.NoError(t, f.close(context.Background()))
		})
	}
}

// A stream that breaks is opened again, after failed opens too, and every
// follower then looks: what happened while it was down is not lost. A
// follower that stopped watching is not woken; close ends the stream.
func TestEventFeedReopensAndWakesEveryone(t *testing.T) {
	s := newFakeStreams()
	f := newEventFeed(s.open)
	f.retryFirst, f.retryMost = time.Millisecond, 4*time.Millisecond
	w1, stop1 := f.watch("c1")
	defer stop1()
	w2, stop2 := f.watch("c2")
	pw := s.next(t)
	woken(t, w1, "c1 at the first open")
	woken(t, w2, "c2 at the first open")

	s.fail <- errors.New("engine restarting")
	s.fail <- errors.New("engine restarting")
	pw.CloseWithError(errors.New("connection reset"))
	pw = s.next(t)
	woken(t, w1, "c1 after the stream came back")
	woken(t, w2, "c2 after the stream came back")

	stop2()
	send(t, pw, `{"Type":"container","Action":"die","Actor":{"ID":"c2"}}`, `{"Type":"container","Action":"die","Actor":{"ID":"c1"}}`)
	woken(t, w1, "c1's die")
	notWoken(t, w2, "c2 stopped watching")

	send(t, pw, `not json`)
	s.next(t)
	woken(t, w1, "c1 after a stream that could not be read")

	require.NoError(t, f.close(context.Background()))
	_, stop3 := f.watch("c3")
	defer stop3()
	select {
	case <-s.opened:
		t.Fatal("a closed feed opened its stream again")
	default:
	}
}

// A feed nobody watched has nothing to close.
func TestEventFeedCloseWithoutStream(t *testing.T) {
	f := newEventFeed(func(context.Context) (io.ReadCloser, error) {
		t.Fatal("opened with no follower")
		return nil, nil
	})
	require.NoError(t, f.close(context.Background()))
}

// The runtime asks only for its own machine's containers' events.
func TestEventsPathFiltersOnTheMachine(t *testing.T) {
	u, err := url.Parse(eventsPath("edge-1"))
	require.NoError(t, err)
	assert.Equal(t, "/events", u.Path)
	assert.JSONEq(t, `{"type":["container"],"label":["io.meshroll.machine=edge-1"]}`, u.Query().Get("filters"))
}

// The reviver's next look is due when the wait of a container stopped for
// good ends, soon when its start failed, never while it runs; a container
// that ran calm before it stopped starts the waits over, though no look
// came while it ran.
func TestReviverDue(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ctx := context.Background()
	v := reviver{wait: reviveFirst}
	assert.Zero(t, v.due(at(0)), "nothing waited for while it runs")
	v.look(ctx, nil, nil, true, at(0))
	assert.Equal(t, reviveFirst, v.due(at(0)))
	assert.Equal(t, 400*time.Millisecond, v.due(at(600*time.Millisecond)))
	assert.Equal(t, reviveRetry, v.due(at(3*time.Second)), "a wait past its end is retried soon")

	v = reviver{wait: 8 * time.Second}
	v.look(ctx, nil, nil, false, at(0))
	v.look(ctx, nil, nil, true, at(12*time.Second))
	assert.Equal(t, reviveFirst, v.wait, "it ran calm before it stopped")
	v = reviver{wait: 8 * time.Second}
	v.look(ctx, nil, nil, false, at(0))
	v.look(ctx, nil, nil, true, at(3*time.Second))
	assert.Equal(t, 8*time.Second, v.wait, "it stopped again soon")
}
