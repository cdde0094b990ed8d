package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/statedir"
)

// Files in the state directory.
const (
	// LedgerFile is the checkpoint: the ledger and containers as of a
	// journal index.
	LedgerFile = "ledger.json"
	// JournalFile is the journal, one Entry per line, oldest first.
	JournalFile = "journal.jsonl"
	// lockFile is held (flock) while an agent uses the directory.
	lockFile = "lock"
)

// checkpointVersion is the ledger.json format; a different one is refused
// rather than misread.
const checkpointVersion = 1

// checkpoint is ledger.json. It is derived from the journal: replaying the
// journal's entries after JournalIndex on top of it gives the agent's state,
// so it may lag the journal (a crash, a failed write) but never lead it.
type checkpoint struct {
	Version int `json:"version"`
	// JournalIndex is the last journal entry reflected here.
	JournalIndex uint64      `json:"journal_index"`
	Written      time.Time   `json:"written"`
	Ledger       host.Ledger `json:"ledger"`
	// Containers are the declared containers as reported when written.
	// Their states are history: a restarted agent hands them to the runtime
	// again and reports what the runtime says.
	Containers []mesh.RunningContainer `json:"containers"`
	// Ports are the loopback ports the agent picked for port-auto probes,
	// by module (keptPorts).
	Ports map[string]int `json:"ports,omitempty"`
}

// keptPorts is the ports the last agent picked, by module: the
// checkpoint's, or those of an applied entry after it.
func keptPorts(checkpointed map[string]int, replay []Entry) map[string]int {
	ports := checkpointed
	for _, e := range replay {
		if e.Outcome == OutcomeApplied {
			ports = e.Ports
		}
	}
	return ports
}

// readCheckpoint reads ledger.json; ok is false when there is none yet.
func readCheckpoint(dir string) (cp checkpoint, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, LedgerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("read checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return checkpoint{}, false, fmt.Errorf("decode %s: %w", filepath.Join(dir, LedgerFile), err)
	}
	if cp.Version != checkpointVersion {
		return checkpoint{}, false, fmt.Errorf("%s has format version %d; this agent reads version %d", filepath.Join(dir, LedgerFile), cp.Version, checkpointVersion)
	}
	return cp, true, nil
}

// writeCheckpoint replaces ledger.json atomically and durably: temporary
// file, sync, rename, sync the directory. A crash at any point leaves either
// the old or the new checkpoint whole.
func writeCheckpoint(dir string, cp checkpoint) error {
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	b = append(b, '\n')
	final := filepath.Join(dir, LedgerFile)
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := statedir.Sync(dir); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// replayLocked redoes what a journal entry the checkpoint lacks did to the
// ledger, exactly as Apply and observeLocked did it when it was written.
func (a *Agent) replayLocked(e Entry) {
	switch e.Outcome {
	case OutcomeApplied:
		a.ledger.Record(declarationOf(e))
	case OutcomeFound:
		a.ledger.Found(declarationOf(e))
	case OutcomeRunning, OutcomeFloorRaised:
		for _, c := range e.Containers {
			// Running raised the floor only for a container without a
			// check (Health nil).
			if e.Outcome == OutcomeFloorRaised || c.Health == nil {
				a.ledger.Ran(mesh.RunningContainer{Module: c.Module, Digest: c.Digest, Generation: c.Generation})
			}
		}
	}
}

// appendLocked fills in what every entry carries and journals e.
func (a *Agent) appendLocked(e *Entry) error {
	e.Time = time.Now().UTC()
	e.Runtime = a.rt.Name()
	e.LastSeq = a.ledger.LastSeq
	if e.Outcome == OutcomeApplied {
		e.LastSeq = e.Seq
	}
	broken, err := a.journal.append(e, a.crash)
	switch {
	case errors.Is(err, errCrashed):
		a.dead = true
	case broken:
		a.broken = err
		a.log.Error().Err(err).Msg("journal is in an unknown state; refusing declarations until restarted")
	}
	return err
}

// checkpointLocked writes ledger.json as of the journal's last entry.
func (a *Agent) checkpointLocked() error {
	cp := checkpoint{
		Version:      checkpointVersion,
		JournalIndex: uint64(len(a.journal.offs)),
		Written:      time.Now().UTC(),
		Ledger:       a.ledger,
		Containers:   a.containers,
		Ports:        portsOf(a.watches),
	}
	if cp.Containers == nil {
		cp.Containers = []mesh.RunningContainer{}
	}
	if err := writeCheckpoint(a.dir, cp); err != nil {
		return err
	}
	a.checkpointed = cp.JournalIndex
	return nil
}

// crashedAt stops the agent, as a kill would, if the test hook says so.
func (a *Agent) crashedAt(point string) bool {
	if a.crash != nil && a.crash(point) {
		a.dead = true
		return true
	}
	return false
}

func (a *Agent) readableLocked() error {
	switch {
	case a.dead:
		return errCrashed
	case a.closed:
		return ErrClosed
	}
	return nil
}

func (a *Agent) writableLocked() error {
	if err := a.readableLocked(); err != nil {
		return err
	}
	if a.broken != nil {
		return fmt.Errorf("agent takes no declaration until restarted, since its journal could not be written: %w", a.broken)
	}
	return nil
}
