// Package catalogue is the store of builds: which digests exist for each
// module, their generations, and which have converged on some machine. The
// push path asks it to turn a running digest into a generation, because
// digests are not orderable and a host's own claim is not trusted.
//
// Catalogue is the contract; Memory and File are the implementations of this
// stage (File is the worker's default, so a restarted worker still knows every
// build). A SQL catalogue drops in behind the same interface.
package catalogue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Catalogue records builds and answers for them. Implementations are safe
// for concurrent use.
type Catalogue interface {
	// Record adds a build; recording the same build again is a no-op.
	Record(ctx context.Context, b mesh.Build) error
	// Lookup returns the build a digest belongs to. When reproducible builds
	// gave several commits one digest, it returns the highest generation, so
	// that what runs is never judged older than it is.
	Lookup(ctx context.Context, digest string) (mesh.Build, bool, error)
	// NewestConverged returns the module's newest build that some machine
	// has reported running.
	NewestConverged(ctx context.Context, module string) (mesh.Build, bool, error)
	// MarkConverged notes that a machine reported the build running.
	MarkConverged(ctx context.Context, digest, machine string) error
}

// entry is one build and the machines it has converged on.
type entry struct {
	Build     mesh.Build `json:"build"`
	Converged []string   `json:"converged,omitempty"`
}

// Memory is an in-process catalogue, for tests and as File's cache.
type Memory struct {
	mu      sync.Mutex
	entries []entry
	persist func([]entry) error
}

// NewMemory returns an empty catalogue.
func NewMemory() *Memory { return &Memory{} }

// Record implements Catalogue.
func (m *Memory) Record(_ context.Context, b mesh.Build) error {
	if err := mesh.ValidDigest(b.Digest); err != nil {
		return fmt.Errorf("record build of %s: %w", b.Module, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.Build.Module == b.Module && e.Build.Commit == b.Commit {
			if e.Build.Digest != b.Digest {
				return fmt.Errorf("record build of %s at %s: already recorded with digest %s, now %s (the build is not reproducible)",
					b.Module, b.Commit, e.Build.Digest, b.Digest)
			}
			return nil
		}
	}
	m.entries = append(m.entries, entry{Build: b})
	return m.save()
}

// Lookup implements Catalogue.
func (m *Memory) Lookup(_ context.Context, digest string) (mesh.Build, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best mesh.Build
	found := false
	for _, e := range m.entries {
		if e.Build.Digest == digest && (!found || e.Build.Generation > best.Generation) {
			best, found = e.Build, true
		}
	}
	return best, found, nil
}

// NewestConverged implements Catalogue.
func (m *Memory) NewestConverged(_ context.Context, module string) (mesh.Build, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best mesh.Build
	found := false
	for _, e := range m.entries {
		if e.Build.Module == module && len(e.Converged) > 0 && (!found || e.Build.Generation > best.Generation) {
			best, found = e.Build, true
		}
	}
	return best, found, nil
}

// MarkConverged implements Catalogue.
func (m *Memory) MarkConverged(_ context.Context, digest, machine string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed, found := false, false
	for i := range m.entries {
		e := &m.entries[i]
		if e.Build.Digest != digest {
			continue
		}
		found = true
		if !contains(e.Converged, machine) {
			e.Converged = append(e.Converged, machine)
			changed = true
		}
	}
	if !found {
		return fmt.Errorf("mark %s converged on %s: digest not in the catalogue", digest, machine)
	}
	if !changed {
		return nil
	}
	return m.save()
}

func (m *Memory) save() error {
	if m.persist == nil {
		return nil
	}
	return m.persist(m.entries)
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// OpenFile opens (or creates) a catalogue kept in one JSON file, rewritten
// atomically (temp file, fsync, rename) on every change. It is meant for one
// worker process; share a SQL catalogue between workers.
func OpenFile(path string) (*Memory, error) {
	m := &Memory{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("open catalogue: %w", err)
	default:
		if err := json.Unmarshal(data, &m.entries); err != nil {
			return nil, fmt.Errorf("open catalogue %s: %w (move it aside to start an empty one)", path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open catalogue: %w", err)
	}
	m.persist = func(es []entry) error { return writeAtomic(path, es) }
	return m, nil
}

func writeAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("save catalogue: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".catalogue-*")
	if err != nil {
		return fmt.Errorf("save catalogue: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save catalogue: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save catalogue: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save catalogue: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save catalogue: %w", err)
	}
	return nil
}
