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
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
