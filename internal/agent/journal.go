package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Journal outcomes. Every answer the agent gives to a declaration is one of
// the first three; the others are what became of an applied declaration's
// containers.
const (
	// OutcomeApplied: the declaration was recorded and handed to the
	// runtime. This entry is the commit point of an apply.
	OutcomeApplied = "applied"
	// OutcomeRepeat: an exact repeat of the last applied declaration,
	// acknowledged without applying anything.
	OutcomeRepeat = "repeat"
	// OutcomeRefused: the declaration was refused; Code and Message say
	// why, exactly as the caller was told.
	OutcomeRefused = "refused"
	// OutcomeRunning: the container in Containers reached running. For a
	// container without a check (Health nil) that raised its module's
	// floor.
	OutcomeRunning = "running"
	// OutcomeHealthy: the container in Containers passed its probe after
	// not being healthy (Message: what the probe said).
	OutcomeHealthy = "healthy"
	// OutcomeUnhealthy: the container in Containers failed its probe after
	// not being unhealthy (Message: what the probe said: the HTTP status,
	// the exit code and the first of the output, or the error). An exit or
	// a crash-loop breaks health too; its own entry says why.
	OutcomeUnhealthy = "unhealthy"
	// OutcomeFloorRaised: the container in Containers, having a check, has
	// been healthy for its min_healthy without a break, which raised its
	// module's floor.
	OutcomeFloorRaised = "floor-raised"
	// OutcomeCrashLooping: the container in Containers crash-loops.
	OutcomeCrashLooping = "crash-looping"
	// OutcomeExited: the container in Containers exited.
	OutcomeExited = "exited"
	// OutcomeRuntimeFailed: the runtime could not take the declaration at
	// all; its containers are reported exited.
	OutcomeRuntimeFailed = "runtime-failed"
	// OutcomeFound: an agent started on an empty state directory found
	// the containers in Containers left running for its machine (see
	// Finder), and keeps them, at sequence 0, until the first declaration.
	// Always the first entry of its journal.
	OutcomeFound = "found"
)

// Journal paging limits.
const (
	// DefaultJournalLimit is the page size when none is asked for: enough
	// for "what happened here lately" in one read.
	DefaultJournalLimit = 50
	// MaxJournalLimit bounds a page, so one request cannot make the agent
	// read its whole history at once.
	MaxJournalLimit = 500
	// maxPageBytes bounds one page's encoded entries, so that a page of
	// large declarations cannot make the agent buffer without limit; a page
	// cut short still carries its cursor.
	maxPageBytes = 4 << 20
)

// Merge and Entry are the journal's wire types, defined with the host API
// contract so that every client reads the journal the agent writes.
type (
	Merge = host.JournalMerge
	Entry = host.JournalEntry
)

// declarationOf rebuilds the declaration an applied entry recorded. The entry
// keeps every field of it, so the rebuilt one is an exact repeat of the
// original (host.SameDeclaration).
func declarationOf(e Entry) mesh.Declaration {
	return mesh.Declaration{
		Machine: e.Machine, Seq: e.Seq, Plan: e.Plan, Request: e.Request,
		Force: e.Force, Revert: e.Revert, Rollback: e.Rollback, Reason: e.Reason, Containers: e.Containers,
	}
}

func entryFor(d mesh.Declaration, outcome string) Entry {
	return Entry{
		Outcome: outcome, Machine: d.Machine, Seq: d.Seq, Plan: d.Plan, Request: d.Request,
		Merge: mergeOf(d.Plan), Force: d.Force, Revert: d.Revert, Rollback: d.Rollback, Reason: d.Reason, Containers: d.Containers,
	}
}

// mergeOf reads module and commit from a plan ID, accepting only IDs that
// meshapi.PlanID would make, so that a free-form plan name is never misread.
func mergeOf(plan string) *Merge {
	i := strings.LastIndex(plan, "/")
	if i < 0 {
		return nil
	}
	commit, rest := plan[i+1:], plan[:i]
	module := rest[strings.LastIndex(rest, "/")+1:]
	if mesh.ValidName("module", module) != nil || mesh.ValidCommit(commit) != nil || meshapi.PlanID(module, commit) != plan {
		return nil
	}
	return &Merge{Module: module, Commit: commit}
}

// journal is the append-only file of entries, one JSON object per line. Its
// methods are called with the agent's mutex held.
type journal struct {
	f    *os.File
	offs []int64 // offs[i] is where entry i+1 starts
	end  int64
}

// openJournal opens (creating) the journal, checks every line and drops a
// torn last line: one that is cut short or does not decode. Such a line was
// being written when the agent stopped, was never synced whole and so was
// never answered, and dropping it is what keeps the journal from claiming
// anything that did not happen. A bad line anywhere else is corruption and
// fails the open. It returns the entries after index after, for replay.
func openJournal(path string, after uint64) (j *journal, replay []Entry, dropped int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open journal: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
		}
	}()
	j = &journal{f: f}
	r := bufio.NewReader(f)
	var off int64
	for {
		line, rerr := r.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, nil, 0, fmt.Errorf("read journal: %w", rerr)
		}
		if len(line) == 0 {
			break
		}
		var e Entry
		bad := rerr != nil // no newline: cut short
		if !bad {
			bad = json.Unmarshal(line, &e) != nil || e.Index != uint64(len(j.offs))+1
		}
		if bad {
			if _, perr := r.Peek(1); rerr == nil && !errors.Is(perr, io.EOF) {
				return nil, nil, 0, fmt.Errorf("journal %s is corrupt at line %d (offset %d); it is the agent's record and will not be repaired automatically", path, len(j.offs)+1, off)
			}
			st, serr := f.Stat()
			if serr != nil {
				return nil, nil, 0, fmt.Errorf("stat journal: %w", serr)
			}
			dropped = st.Size() - off
			if err := f.Truncate(off); err != nil {
				return nil, nil, 0, fmt.Errorf("drop torn journal tail: %w", err)
			}
			if err := f.Sync(); err != nil {
				return nil, nil, 0, fmt.Errorf("sync journal: %w", err)
			}
			break
		}
		j.offs = append(j.offs, off)
		off += int64(len(line))
		if e.Index > after {
			replay = append(replay, e)
		}
		if rerr != nil {
			break
		}
	}
	j.end = off
	return j, replay, dropped, nil
}

// next is the index the next entry gets.
func (j *journal) next() uint64 { return uint64(len(j.offs)) + 1 }

// append writes e as the next line and syncs it. On failure it cuts the file
// back to where it was, so a failed append leaves no line behind; if even
// that fails the journal can no longer be trusted and the error says so
// (broken is set).
func (j *journal) append(e *Entry, crash func(string) bool) (broken bool, err error) {
	e.Index = j.next()
	b, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("encode journal entry %d: %w", e.Index, err)
	}
	b = append(b, '\n')
	if crash != nil && crash(crashJournalWrite) {
		// What a process killed mid-write leaves: part of the line.
		_, _ = j.f.Write(b[:len(b)/2])
		return false, errCrashed
	}
	n, err := j.f.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		err = fmt.Errorf("append journal entry %d: %w", e.Index, err)
		if terr := j.f.Truncate(j.end); terr != nil {
			return true, fmt.Errorf("%w; cutting it back failed too: %w", err, terr)
		}
		if serr := j.f.Sync(); serr != nil {
			return true, fmt.Errorf("%w; syncing the cut failed too: %w", err, serr)
		}
		return false, err
	}
	j.offs = append(j.offs, j.end)
	j.end += int64(len(b))
	return false, nil
}

// page reads up to limit entries with Index below before (0: from the
// newest), newest first.
func (j *journal) page(before uint64, limit int) ([]Entry, error) {
	hi := uint64(len(j.offs)) // newest index in range
	if before != 0 && before-1 < hi {
		hi = before - 1
	}
	out := []Entry{}
	size := 0
	for i := hi; i >= 1 && len(out) < limit; i-- {
		start, end := j.offs[i-1], j.end
		if i < uint64(len(j.offs)) {
			end = j.offs[i]
		}
		if len(out) > 0 && size+int(end-start) > maxPageBytes {
			break
		}
		buf := make([]byte, end-start)
		if _, err := j.f.ReadAt(buf, start); err != nil {
			return nil, fmt.Errorf("read journal entry %d: %w", i, err)
		}
		var e Entry
		if err := json.Unmarshal(bytes.TrimSuffix(buf, []byte("\n")), &e); err != nil {
			return nil, fmt.Errorf("decode journal entry %d: %w", i, err)
		}
		out = append(out, e)
		size += len(buf)
	}
	return out, nil
}

func (j *journal) close() error { return j.f.Close() }

// Journal returns up to limit entries older than index before (0: from the
// newest), newest first, so that "what happened here lately" is one call
// and older history is paged with the last entry's Index. limit outside
// 1..MaxJournalLimit is taken as DefaultJournalLimit or MaxJournalLimit. A
// page may be shorter than limit when its entries are large.
func (a *Agent) Journal(ctx context.Context, before uint64, limit int) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if limit <= 0 {
		limit = DefaultJournalLimit
	}
	limit = min(limit, MaxJournalLimit)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.readableLocked(); err != nil {
		return nil, err
	}
	return a.journal.page(before, limit)
}
