package machines

import (
	"context"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
)

// JournalPage is a stretch of a machine's journal, newest first, with the
// cursor of the stretch before it: what a person paging back through a
// machine's history reads one screen at a time.
type JournalPage struct {
	Entries []JournalEntry `json:"entries"`
	// NextBefore is the before that reads the next older page; 0 when the
	// journal has nothing older.
	NextBefore uint64 `json:"next_before"`
}

// Journal reads up to n entries of machine name's journal (m its config), newest first,
// older than entry index before (0: from the newest), within HostTimeout.
// The error names the host, worded as Show words it.
func Journal(ctx context.Context, name string, m config.Machine, before uint64, n int) (JournalPage, error) {
	hc, err := hostClient(m)
	if err != nil {
		return JournalPage{Entries: []JournalEntry{}}, err
	}
	ctx, cancel := context.WithTimeout(ctx, HostTimeout)
	defer cancel()
	es, next, err := journalFrom(ctx, hc, before, n)
	if err != nil {
		return JournalPage{Entries: es}, &partsError{msg: "journal: " + hostProblem(name, m, err), errs: []error{err}}
	}
	return JournalPage{Entries: es, NextBefore: next}, nil
}

// journal reads the latest n entries, newest first, paging as needed.
func journal(ctx context.Context, hc *host.HTTPClient, n int) ([]JournalEntry, error) {
	es, _, err := journalFrom(ctx, hc, 0, n)
	return es, err
}

// journalFrom reads up to n entries older than index before (0: from the
// newest), newest first, asking the host a page of at most journalPage at
// a time, and returns the before of what it did not read (0: nothing is
// older).
func journalFrom(ctx context.Context, hc *host.HTTPClient, before uint64, n int) ([]JournalEntry, uint64, error) {
	out := []JournalEntry{}
	for len(out) < n {
		page, err := hc.Journal(ctx, before, min(n-len(out), journalPage))
		if err != nil {
			return out, 0, err
		}
		for _, e := range page.Entries {
			if len(out) == n {
				break
			}
			out = append(out, journalEntry(e))
		}
		if page.NextBefore == 0 || len(page.Entries) == 0 {
			return out, 0, nil
		}
		before = page.NextBefore
	}
	if len(out) == 0 {
		return out, 0, nil
	}
	// Indexes count from 1 and pages are contiguous: whatever is older
	// than the last entry read comes next.
	last := out[len(out)-1].Index
	if last <= 1 {
		return out, 0, nil
	}
	return out, last, nil
}

// journalEntry is a host's journal entry cut to what says which build was
// meant, without the containers' settings.
func journalEntry(e host.JournalEntry) JournalEntry {
	je := JournalEntry{
		Index: e.Index, Time: e.Time, Outcome: e.Outcome, Seq: e.Seq, Plan: e.Plan, Request: e.Request,
		Force: e.Force, ForcedPast: e.ForcedPast, Code: e.Code, Message: e.Message,
		Revert: e.Revert, Rollback: e.Rollback, Reason: e.Reason, Containers: []JournalContainer{},
	}
	for _, c := range e.Containers {
		je.Containers = append(je.Containers, JournalContainer{Module: c.Module, Digest: c.Digest, Generation: c.Generation})
	}
	return je
}
