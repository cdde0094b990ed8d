package fleetwatch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/host"
)

// start runs a watcher of f as edge-1 until the test ends (or the returned
// stop), which waits for Run to return.
func start(t *testing.T, f *fakeHost, s *countingStore, w *Watcher) (stop func()) {
	t.Helper()
	w.Hosts = map[string]host.ReportWaiter{"edge-1": f.client(t)}
	w.Store = s
	w.Log = zerolog.Nop()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func TestChangedReportRecorded(t *testing.T) {
	f := newFakeHost(t, 10, 1)
	s := newCountingStore()
	start(t, f, s, &Watcher{Wait: time.Hour})
	s.waitFor(t, "seq 1 at revision 10", func(h catalogue.HostState) bool {
		return h.Report != nil && h.Report.LastSeq == 1 && h.Revision == 10
	})
	f.set(2)
	h := s.waitFor(t, "seq 2 at revision 11", func(h catalogue.HostState) bool {
		return h.Report != nil && h.Report.LastSeq == 2 && h.Revision == 11
	})
	if h.HeardAt.IsZero() || h.ChangedAt.IsZero() {
		t.Fatalf("the picture of edge-1 = %+v; want it heard and changed at a time", h)
	}
}

func TestUnchangedReportCostsNoWrite(t *testing.T) {
	f := newFakeHost(t, 10, 1)
	s := newCountingStore()
	// Polls that end unchanged at once, and no flush until the end.
	stop := start(t, f, s, &Watcher{Wait: time.Millisecond, FlushEvery: time.Hour})
	f.servedAtLeast(t, 6)
	if reports, heards, errs := s.counts(); reports != 1 || heards != 0 || errs != 0 {
		t.Fatalf("after 6 polls of an unchanged host: %d reports, %d heard batches, %d errors written; want 1, 0, 0", reports, heards, errs)
	}
	stop()
	// Stopping writes the hosts heard since the last flush, in one batch.
	if reports, heards, _ := s.counts(); reports != 1 || heards != 1 {
		t.Fatalf("after stopping: %d reports, %d heard batches written; want 1 and 1", reports, heards)
	}
	hs, _ := s.HostStates(t.Context())
	if len(hs) != 1 || !hs[0].HeardAt.After(hs[0].ChangedAt) {
		t.Fatalf("the picture = %+v; want edge-1 heard after its report was recorded", hs)
	}
}

func TestSilentHostRecordsItsError(t *testing.T) {
	f := newFakeHost(t, 10, 1)
	s := newCountingStore()
	clock := stepClock{fire: make(chan time.Time)}
	start(t, f, s, &Watcher{Wait: time.Hour, Retry: clock})
	s.waitFor(t, "seq 1", func(h catalogue.HostState) bool { return h.Report != nil })
	// The host goes away: its long poll is cut, and then nothing listens.
	f.die()
	h := s.waitFor(t, "an error", func(h catalogue.HostState) bool { return h.Error != "" && h.ErrorSince != nil })
	since := *h.ErrorSince
	for !strings.Contains(h.Error, "refused") {
		clock.fire <- time.Time{}
		h = s.waitFor(t, "an error", func(h catalogue.HostState) bool { return h.Error != "" })
	}
	_, _, errs := s.counts()
	// The same error again is not written again: the picture already
	// says it, and since when.
	for range 3 {
		clock.fire <- time.Time{}
	}
	clock.fire <- time.Time{} // the third retry's poll has ended
	if _, _, again := s.counts(); again != errs {
		t.Fatalf("3 more refusals wrote %d more errors; want none", again-errs)
	}
	h = s.waitFor(t, "the error", func(h catalogue.HostState) bool { return true })
	if h.Report == nil || h.Report.LastSeq != 1 || !h.ErrorSince.Equal(since) {
		t.Fatalf("the picture of edge-1 = %+v; want its last report kept, failing since %s", h, since)
	}
}

// A host set while the watcher runs is watched from then on, and one
// dropped is no longer; the other hosts' long polls go on untouched (not
// asked again).
func TestSetAndDropWhileRunning(t *testing.T) {
	f1, f2 := newFakeHost(t, 10, 1), newFakeHost(t, 20, 7)
	s := newCountingStore()
	w := &Watcher{Wait: time.Hour}
	start(t, f1, s, w)
	s.waitFor(t, "edge-1 recorded", func(h catalogue.HostState) bool { return h.Report != nil })

	w.Set("edge-2", f2.client(t))
	s.waitForMachine(t, "edge-2", "edge-2 recorded", func(h catalogue.HostState) bool {
		return h.Report != nil && h.Report.LastSeq == 7
	})
	f2.set(8)
	s.waitForMachine(t, "edge-2", "edge-2's change recorded", func(h catalogue.HostState) bool {
		return h.Report != nil && h.Report.LastSeq == 8
	})

	w.Drop("edge-2")
	f2.set(9)
	f1.set(2)
	s.waitFor(t, "edge-1's change recorded", func(h catalogue.HostState) bool { return h.Report.LastSeq == 2 })
	f1.mu.Lock()
	asked := f1.requests
	f1.mu.Unlock()
	// Its first ask, the long poll that the change answered, and perhaps
	// the next: a watch started again would have asked anew at once.
	if asked > 3 {
		t.Fatalf("edge-1 was asked %d times; want at most 3: its long poll goes on while edge-2 is set and dropped", asked)
	}
	hs, _ := s.HostStates(t.Context())
	for _, h := range hs {
		if h.Machine == "edge-2" && h.Report.LastSeq != 8 {
			t.Fatalf("edge-2 was recorded at seq %d after it was dropped; want 8", h.Report.LastSeq)
		}
	}
}
