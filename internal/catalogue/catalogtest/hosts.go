package catalogtest

import (
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

// t0 is the picture's tests' clock: whole seconds, which every store keeps
// exactly.
var t0 = time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)

// report is a report of machine at seq.
func report(machine string, seq uint64) mesh.Report {
	return mesh.Report{Machine: machine, LastSeq: seq, Containers: []mesh.RunningContainer{
		{Module: "api", Digest: Build("api", int64(seq)).Digest, Generation: int64(seq), State: "running"},
	}}
}

// hostState is machine's state in the picture; ok false when it has none.
func hostState(t *testing.T, c catalogue.Catalogue, machine string) (catalogue.HostState, bool) {
	t.Helper()
	hs, err := c.HostStates(t.Context())
	if err != nil {
		t.Fatalf("HostStates: %v", err)
	}
	for _, h := range hs {
		if h.Machine == machine {
			return h, true
		}
	}
	return catalogue.HostState{}, false
}

// recordReport records a report and checks whether it was written.
func recordReport(t *testing.T, c catalogue.Catalogue, machine string, seq, rev uint64, at time.Time, want bool) {
	t.Helper()
	got, err := c.RecordHostReport(t.Context(), machine, report(machine, seq), rev, at)
	if err != nil || got != want {
		t.Fatalf("RecordHostReport(%s, seq %d, rev %d) = %v, %v; want %v", machine, seq, rev, got, err, want)
	}
}

// expectHost checks machine's report seq, revision, heard time and error.
func expectHost(t *testing.T, c catalogue.Catalogue, machine string, seq, rev uint64, heard time.Time, errMsg string, since time.Time) {
	t.Helper()
	h, ok := hostState(t, c, machine)
	if !ok || h.Report == nil {
		t.Fatalf("HostStates has no report of %s: %+v", machine, h)
	}
	gotSince := time.Time{}
	if h.ErrorSince != nil {
		gotSince = *h.ErrorSince
	}
	if h.Report.LastSeq != seq || h.Revision != rev || !h.HeardAt.Equal(heard) || h.Error != errMsg || !gotSince.Equal(since) ||
		len(h.Report.Containers) != 1 || h.Report.Containers[0].Generation != int64(seq) {
		t.Fatalf("%s = %+v (report %+v); want seq %d, revision %d, heard %s, error %q since %s",
			machine, h, *h.Report, seq, rev, heard, errMsg, since)
	}
}

func testHostsEmpty(t *testing.T, c catalogue.Catalogue) {
	hs, err := c.HostStates(t.Context())
	if err != nil || len(hs) != 0 {
		t.Fatalf("HostStates of a new catalogue = %+v, %v; want none", hs, err)
	}
}

func testHostReportNewestRevisionWins(t *testing.T, c catalogue.Catalogue) {
	recordReport(t, c, "edge-1", 1, 100, t0, true)
	recordReport(t, c, "edge-1", 2, 102, t0.Add(time.Second), true)
	// A watcher that heard an older revision late, or the same one again,
	// does not take the picture back.
	recordReport(t, c, "edge-1", 1, 101, t0.Add(2*time.Second), false)
	recordReport(t, c, "edge-1", 2, 102, t0.Add(3*time.Second), false)
	expectHost(t, c, "edge-1", 2, 102, t0.Add(time.Second), "", time.Time{})
	// A host that does not long-poll (revision 0) is recorded each time.
	recordReport(t, c, "edge-2", 1, 0, t0, true)
	recordReport(t, c, "edge-2", 3, 0, t0.Add(time.Second), true)
	expectHost(t, c, "edge-2", 3, 0, t0.Add(time.Second), "", time.Time{})
}

func testHostsHeardForwardOnly(t *testing.T, c catalogue.Catalogue) {
	recordReport(t, c, "edge-1", 1, 100, t0, true)
	recordReport(t, c, "edge-2", 1, 100, t0, true)
	heard := func(at time.Time, ms ...string) {
		t.Helper()
		if err := c.HostsHeard(t.Context(), ms, at); err != nil {
			t.Fatalf("HostsHeard(%v): %v", ms, err)
		}
	}
	heard(t0.Add(5*time.Second), "edge-1", "edge-2", "edge-never")
	heard(t0.Add(3*time.Second), "edge-1")
	heard(t0)
	expectHost(t, c, "edge-1", 1, 100, t0.Add(5*time.Second), "", time.Time{})
	expectHost(t, c, "edge-2", 1, 100, t0.Add(5*time.Second), "", time.Time{})
	if h, ok := hostState(t, c, "edge-never"); ok {
		t.Fatalf("HostsHeard made a state for a host never recorded: %+v", h)
	}
}

func testHostErrorSinceAndCleared(t *testing.T, c catalogue.Catalogue) {
	// A host never heard has its error alone.
	if err := c.RecordHostError(t.Context(), "edge-9", "connection refused", t0); err != nil {
		t.Fatal(err)
	}
	if h, ok := hostState(t, c, "edge-9"); !ok || h.Report != nil || h.Error != "connection refused" || !h.HeardAt.IsZero() {
		t.Fatalf("edge-9 = %+v; want its error and no report", h)
	}
	recordReport(t, c, "edge-1", 1, 100, t0, true)
	for i, msg := range []string{"connection refused", "timeout"} {
		if err := c.RecordHostError(t.Context(), "edge-1", msg, t0.Add(time.Duration(10+i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// The last error, failing since the first.
	expectHost(t, c, "edge-1", 1, 100, t0, "timeout", t0.Add(10*time.Second))
	// An answer heard before the error (another watcher, late) leaves it.
	if err := c.HostsHeard(t.Context(), []string{"edge-1"}, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	expectHost(t, c, "edge-1", 1, 100, t0.Add(5*time.Second), "timeout", t0.Add(10*time.Second))
	// An error from before the last answer is dropped.
	if err := c.RecordHostError(t.Context(), "edge-2", "x", t0); err != nil {
		t.Fatal(err)
	}
	recordReport(t, c, "edge-2", 1, 100, t0.Add(time.Second), true)
	if err := c.RecordHostError(t.Context(), "edge-2", "late", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	expectHost(t, c, "edge-2", 1, 100, t0.Add(time.Second), "", time.Time{})
	// A later answer clears the error, unchanged report or new.
	if err := c.HostsHeard(t.Context(), []string{"edge-1"}, t0.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	expectHost(t, c, "edge-1", 1, 100, t0.Add(20*time.Second), "", time.Time{})
	if err := c.RecordHostError(t.Context(), "edge-1", "refused", t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	recordReport(t, c, "edge-1", 2, 200, t0.Add(40*time.Second), true)
	expectHost(t, c, "edge-1", 2, 200, t0.Add(40*time.Second), "", time.Time{})
}

// testMachineFeed: the feed kept is the one of the newest asOf; a nil body
// moves asOf alone, and nothing while none is kept.
func testMachineFeed(t *testing.T, c catalogue.Catalogue) {
	ctx := t.Context()
	want := func(asOf time.Time, body string) {
		t.Helper()
		at, got, ok, err := c.MachineFeed(ctx)
		if err != nil || !ok || !at.Equal(asOf) || string(got) != body {
			t.Fatalf("MachineFeed = %v, %q, %v, %v; want %v, %q", at, got, ok, err, asOf, body)
		}
	}
	if _, _, ok, err := c.MachineFeed(ctx); ok || err != nil {
		t.Fatalf("MachineFeed of a new catalogue: ok %v, %v; want none", ok, err)
	}
	if err := c.KeepMachineFeed(ctx, t0, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := c.MachineFeed(ctx); ok {
		t.Fatal("a nil body kept a feed where there was none")
	}
	keep := func(at time.Time, body []byte) {
		t.Helper()
		if err := c.KeepMachineFeed(ctx, at, body); err != nil {
			t.Fatalf("KeepMachineFeed: %v", err)
		}
	}
	keep(t0.Add(time.Second), []byte(`{"a":1}`))
	want(t0.Add(time.Second), `{"a":1}`)
	keep(t0.Add(3*time.Second), nil)
	want(t0.Add(3*time.Second), `{"a":1}`)
	keep(t0.Add(2*time.Second), []byte(`{"a":2}`))
	want(t0.Add(3*time.Second), `{"a":1}`)
	keep(t0.Add(4*time.Second), []byte(`{"a":3}`))
	want(t0.Add(4*time.Second), `{"a":3}`)
}
