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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// ErrNotReproducible is returned by Record when a module's commit was already
// recorded with another digest: the build is not reproducible, and no retry
// of it will agree with the first.
var ErrNotReproducible = errors.New("the build is not reproducible")

// Catalogue records builds and answers for them. Implementations are safe
// for concurrent use, and for concurrent use by several workers where the
// store is shared: recording the same build twice (a retried build
// activity, two workers) records it once.
type Catalogue interface {
	// Record adds a build made by a plan; recording the same module and
	// commit again with the same digest is a no-op, with another digest an
	// error (the build is not reproducible).
	Record(ctx context.Context, b mesh.Build, plan string) error
	// Lookup returns the build a digest belongs to. When reproducible builds
	// gave several commits one digest, it returns the highest generation, so
	// that what runs is never judged older than it is.
	Lookup(ctx context.Context, digest string) (mesh.Build, bool, error)
	// Newest returns the module's build with the highest generation.
	Newest(ctx context.Context, module string) (mesh.Build, bool, error)
	// NewestConverged returns the module's newest build that some machine
	// has reported running.
	NewestConverged(ctx context.Context, module string) (mesh.Build, bool, error)
	// NewestConvergedOn returns the module's build with the highest
	// generation that was marked converged on machine; false when none was.
	// It is the machine's floor as the catalogue keeps it: the push asks it
	// before sending, so that a host that lost its own state (a replaced
	// disk, a re-imaged machine) and comes back empty is still not taken
	// below what the fleet knows ran there. Convergence is per digest, so
	// when reproducible builds gave several commits one digest it answers,
	// as Lookup does, with the highest generation among them.
	NewestConvergedOn(ctx context.Context, module, machine string) (mesh.Build, bool, error)
	// MarkConverged notes that a machine reported the build running.
	MarkConverged(ctx context.Context, digest, machine string) error
	// Builds lists a module's builds, newest first, at most limit (0: all).
	Builds(ctx context.Context, module string, limit int) ([]Entry, error)
}

// Entry is one build with what the catalogue knows about it.
type Entry struct {
	Build     mesh.Build `json:"build"`
	Plan      string     `json:"plan,omitempty"`
	BuiltAt   time.Time  `json:"built_at"`
	Converged []string   `json:"converged,omitempty"`
}

// Memory is an in-process catalogue, for tests and as File's cache.
type Memory struct {
	mu      sync.Mutex
	now     func() time.Time
	entries []Entry
	persist func([]Entry) error
}

// NewMemory returns an empty catalogue.
func NewMemory() *Memory { return &Memory{now: time.Now} }

// Record implements Catalogue.
func (m *Memory) Record(_ context.Context, b mesh.Build, plan string) error {
	if err := mesh.ValidDigest(b.Digest); err != nil {
		return fmt.Errorf("record build of %s: %w", b.Module, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.Build.Module == b.Module && e.Build.Commit == b.Commit {
			if e.Build.Digest != b.Digest {
				return fmt.Errorf("record build of %s at %s: already recorded with digest %s, now %s: %w",
					b.Module, b.Commit, e.Build.Digest, b.Digest, ErrNotReproducible)
			}
			return nil
		}
	}
	m.entries = append(m.entries, Entry{Build: b, Plan: plan, BuiltAt: m.now().UTC()})
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

// Newest implements Catalogue.
func (m *Memory) Newest(_ context.Context, module string) (mesh.Build, bool, error) {
	return m.newest(module, func(Entry) bool { return true })
}

// NewestConverged implements Catalogue.
func (m *Memory) NewestConverged(_ context.Context, module string) (mesh.Build, bool, error) {
	return m.newest(module, func(e Entry) bool { return len(e.Converged) > 0 })
}

// NewestConvergedOn implements Catalogue.
func (m *Memory) NewestConvergedOn(_ context.Context, module, machine string) (mesh.Build, bool, error) {
	return m.newest(module, func(e Entry) bool { return slices.Contains(e.Converged, machine) })
}

// newest returns the module's highest-generation entry that keep accepts.
func (m *Memory) newest(module string, keep func(Entry) bool) (mesh.Build, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best mesh.Build
	found := false
	for _, e := range m.entries {
		if e.Build.Module == module && keep(e) && (!found || e.Build.Generation > best.Generation) {
			best, found = e.Build, true
		}
	}
	return best, found, nil
}

// Builds implements Catalogue.
func (m *Memory) Builds(_ context.Context, module string, limit int) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Entry
	for _, e := range m.entries {
		if e.Build.Module == module {
			e.Converged = slices.Clone(e.Converged)
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return cmp.Compare(b.Build.Generation, a.Build.Generation) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
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
		if !slices.Contains(e.Converged, machine) {
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

// OpenFile opens (or creates) a catalogue kept in one JSON file, rewritten
// atomically (temp file, fsync, rename) on every change. It is meant for one
// worker process; share a SQL catalogue between workers.
func OpenFile(path string) (*Memory, error) {
	m := NewMemory()
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
	m.persist = func(es []Entry) error { return writeAtomic(path, es) }
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
