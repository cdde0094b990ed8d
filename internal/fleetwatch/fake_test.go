package fleetwatch

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// fakeHost is a host agent's report endpoint over HTTP: it long-polls as
// the agent does (answers at once when after is not its revision, else on
// the next change or when wait passes) and counts the requests it served.
type fakeHost struct {
	mu       sync.Mutex
	rev      uint64
	rep      mesh.Report
	changed  chan struct{}
	requests int
	// served is told of each request served.
	served chan struct{}
	// gone, once closed, cuts every request, as a host that died does.
	gone chan struct{}
	srv  *httptest.Server
}

func newFakeHost(t *testing.T, rev uint64, seq uint64) *fakeHost {
	f := &fakeHost{rev: rev, rep: mesh.Report{Machine: "edge-1", LastSeq: seq}, changed: make(chan struct{}), served: make(chan struct{}, 1), gone: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// die cuts every request in flight and every one after, then stops
// listening: a request the client retries on a new connection is cut too,
// rather than held open until its wait ends.
func (f *fakeHost) die() {
	close(f.gone)
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// set changes the report and wakes the long polls.
func (f *fakeHost) set(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rep.LastSeq = seq
	f.rev++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeHost) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != host.PathReport {
		http.NotFound(w, r)
		return
	}
	select {
	case <-f.gone:
		panic(http.ErrAbortHandler)
	default:
	}
	after, _ := strconv.ParseUint(r.URL.Query().Get(host.QueryAfter), 10, 64)
	wait, _ := time.ParseDuration(r.URL.Query().Get(host.QueryWait))
	f.mu.Lock()
	f.requests++
	if after == f.rev && wait > 0 {
		ch := f.changed
		f.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		case <-r.Context().Done():
		case <-f.gone:
			t.Stop()
			panic(http.ErrAbortHandler)
		}
		t.Stop()
		f.mu.Lock()
	}
	rep, rev := f.rep, f.rev
	f.mu.Unlock()
	w.Header().Set(host.HeaderReportRevision, strconv.FormatUint(rev, 10))
	_ = json.NewEncoder(w).Encode(rep)
	select {
	case f.served <- struct{}{}:
	default:
	}
}

// servedAtLeast waits until the host has served n requests.
func (f *fakeHost) servedAtLeast(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		got := f.requests
		f.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-f.served:
		case <-deadline:
			t.Fatalf("the host served %d requests; want %d", got, n)
		}
	}
}

func (f *fakeHost) client(t *testing.T) *host.HTTPClient {
	t.Helper()
	c, err := host.NewHTTPClient(f.srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countingStore is a Memory catalogue that counts the watcher's writes and
// tells the test of each through calls, so that a test waits for what the
// watcher did rather than for time to pass.
type countingStore struct {
	*catalogue.Memory
	mu                      sync.Mutex
	reports, heards, errors int
	calls                   chan struct{}
}

func newCountingStore() *countingStore {
	return &countingStore{Memory: catalogue.NewMemory(), calls: make(chan struct{}, 1)}
}

func (s *countingStore) note(n *int) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
	select {
	case s.calls <- struct{}{}:
	default:
	}
}

func (s *countingStore) RecordHostReport(ctx context.Context, machine string, rep mesh.Report, rev uint64, at time.Time) (bool, error) {
	ok, err := s.Memory.RecordHostReport(ctx, machine, rep, rev, at)
	s.note(&s.reports)
	return ok, err
}

func (s *countingStore) HostsHeard(ctx context.Context, machines []string, at time.Time) error {
	err := s.Memory.HostsHeard(ctx, machines, at)
	s.note(&s.heards)
	return err
}

func (s *countingStore) RecordHostError(ctx context.Context, machine, msg string, at time.Time) error {
	err := s.Memory.RecordHostError(ctx, machine, msg, at)
	s.note(&s.errors)
	return err
}

// counts are the writes so far: reports, heard batches, errors.
func (s *countingStore) counts() (int, int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reports, s.heards, s.errors
}

// waitFor waits, write by write, until cond holds of the store's picture.
func (s *countingStore) waitFor(t *testing.T, what string, cond func(catalogue.HostState) bool) catalogue.HostState {
	t.Helper()
	return s.waitForMachine(t, "edge-1", what, cond)
}

// waitForMachine waits until machine's picture meets cond.
func (s *countingStore) waitForMachine(t *testing.T, machine, what string, cond func(catalogue.HostState) bool) catalogue.HostState {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		hs, _ := s.HostStates(t.Context())
		for _, h := range hs {
			if h.Machine == machine && cond(h) {
				return h
			}
		}
		select {
		case <-s.calls:
		case <-deadline:
			t.Fatalf("the picture never showed %s: %+v", what, hs)
		}
	}
}

// stepClock is a backoff clock whose waits end when the test says: each
// send on fire ends one wait, and blocks until the watcher waits.
type stepClock struct{ fire chan time.Time }

func (c stepClock) After(time.Duration) <-chan time.Time { return c.fire }
