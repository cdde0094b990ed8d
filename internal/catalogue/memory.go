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
	"strings"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Memory is an in-process catalogue, for tests and as File's cache.
type Memory struct {
	mu      sync.Mutex
	now     func() time.Time
	entries []Entry
	freezes []Freeze
	// hosts is the fleet's picture; a File does not keep it (the
	// watcher hears it again at its start).
	hosts map[string]HostState
	// feed is the machine feed kept (KeepMachineFeed), as of feedAsOf;
	// a File does not keep it either.
	feed     []byte
	feedAsOf time.Time
	persist  func([]Entry, []Freeze) error
	// onSets[i] is entries[i].Converged as a set, made when first asked:
	// a plan of thousands of machines marks and asks once per machine,
	// which a scan of the list makes quadratic.
	onSets []map[string]struct{}
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

// Build implements Catalogue.
func (m *Memory) Build(_ context.Context, module, commit string) (mesh.Build, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.Build.Module == module && e.Build.Commit == commit {
			return e.Build, true, nil
		}
	}
	prefix, ok, err := CommitPrefix(commit)
	if err != nil {
		return mesh.Build{}, false, fmt.Errorf("find build of %s at %s: %w", module, commit, err)
	}
	if !ok {
		return mesh.Build{}, false, nil
	}
	var found []mesh.Build
	for _, e := range m.entries {
		if e.Build.Module == module && strings.HasPrefix(e.Build.Commit, prefix) {
			found = append(found, e.Build)
		}
	}
	switch len(found) {
	case 0:
		return mesh.Build{}, false, nil
	case 1:
		return found[0], true, nil
	}
	slices.SortStableFunc(found, func(a, b mesh.Build) int { return cmp.Compare(b.Generation, a.Generation) })
	return mesh.Build{}, false, AmbiguousCommit(module, commit, found)
}

// Newest implements Catalogue.
func (m *Memory) Newest(_ context.Context, module string) (mesh.Build, bool, error) {
	return m.newest(module, false, func(int, Entry) bool { return true })
}

// NewestConverged implements Catalogue.
func (m *Memory) NewestConverged(_ context.Context, module string) (mesh.Build, bool, error) {
	return m.newest(module, true, func(_ int, e Entry) bool { return len(e.Converged) > 0 })
}

// NewestConvergedOn implements Catalogue.
func (m *Memory) NewestConvergedOn(_ context.Context, module, machine string) (mesh.Build, bool, error) {
	return m.newest(module, true, func(i int, _ Entry) bool { return m.convergedOn(i, machine) })
}

// NewestHealthyBelow implements Catalogue.
func (m *Memory) NewestHealthyBelow(_ context.Context, module string, generation int64) (mesh.Build, bool, error) {
	return m.newest(module, true, func(_ int, e Entry) bool { return e.Build.Generation < generation && len(e.Converged) > 0 })
}

// newest returns the module's highest-generation entry that keep accepts,
// leaving out rejected digests when skipRejected.
func (m *Memory) newest(module string, skipRejected bool, keep func(int, Entry) bool) (mesh.Build, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rejected map[string]*Rejection
	if skipRejected {
		rejected = m.rejections()
	}
	var best mesh.Build
	found := false
	for i, e := range m.entries {
		if e.Build.Module != module || !keep(i, e) || rejected[e.Build.Digest] != nil {
			continue
		}
		if !found || e.Build.Generation > best.Generation {
			best, found = e.Build, true
		}
	}
	return best, found, nil
}

// rejections returns each rejected digest's earliest rejection (among equal
// times, that of the build recorded first). m.mu must be held.
func (m *Memory) rejections() map[string]*Rejection {
	out := map[string]*Rejection{}
	for _, e := range m.entries {
		r := e.Rejected
		if r == nil {
			continue
		}
		if first := out[r.Digest]; first == nil || r.At.Before(first.At) {
			out[r.Digest] = r
		}
	}
	return out
}

// Reject implements Catalogue. A rejection is kept on the build's own entry,
// so File writes it with the build and files without any read as before.
func (m *Memory) Reject(_ context.Context, module, commit, by, reason string) (Rejection, error) {
	op := fmt.Sprintf("reject build of %s at %s", module, commit)
	if err := ValidReason(reason); err != nil {
		return Rejection{}, fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.entries {
		e := &m.entries[i]
		if e.Build.Module != module || e.Build.Commit != commit {
			continue
		}
		if e.Rejected != nil {
			return *e.Rejected, nil
		}
		r := Rejection{Module: module, Commit: commit, Digest: e.Build.Digest, By: by, Reason: reason, At: m.now().UTC()}
		e.Rejected = &r
		if err := m.save(); err != nil {
			// Not kept, so that a retry does not find a rejection that was
			// never written and call it done.
			e.Rejected = nil
			return Rejection{}, fmt.Errorf("%s: %w", op, err)
		}
		return r, nil
	}
	return Rejection{}, fmt.Errorf("%s: %w", op, ErrUnknownBuild)
}

// Rejected implements Catalogue.
func (m *Memory) Rejected(_ context.Context, digest string) (Rejection, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rejections()[digest]; r != nil {
		return *r, true, nil
	}
	return Rejection{}, false, nil
}

// Builds implements Catalogue.
func (m *Memory) Builds(_ context.Context, module string, limit int) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rejected := m.rejections()
	var out []Entry
	for _, e := range m.entries {
		if e.Build.Module == module {
			e.Converged = slices.Clone(e.Converged)
			e.Rejected = nil
			if r := rejected[e.Build.Digest]; r != nil {
				copied := *r
				e.Rejected = &copied
			}
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
		if !m.convergedOn(i, machine) {
			e.Converged = append(e.Converged, machine)
			m.onSets[i][machine] = struct{}{}
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

// Freeze implements Catalogue.
func (m *Memory) Freeze(_ context.Context, module, machine, by, reason string) (Freeze, error) {
	if err := ValidFreezeReason(reason); err != nil {
		return Freeze{}, fmt.Errorf("freeze %s: %w", Freeze{Module: module, Machine: machine}.Scope(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := Freeze{ID: int64(len(m.freezes) + 1), Module: module, Machine: machine, By: by, Reason: reason, At: m.now().UTC()}
	m.freezes = append(m.freezes, f)
	if err := m.save(); err != nil {
		m.freezes = m.freezes[:len(m.freezes)-1]
		return Freeze{}, fmt.Errorf("freeze %s: %w", f.Scope(), err)
	}
	return f, nil
}

// Unfreeze implements Catalogue.
func (m *Memory) Unfreeze(_ context.Context, module, machine, by string) ([]Freeze, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	before := slices.Clone(m.freezes)
	at := m.now().UTC()
	var lifted []Freeze
	for i := range m.freezes {
		f := &m.freezes[i]
		if f.LiftedAt != nil || f.Module != module || f.Machine != machine {
			continue
		}
		f.LiftedBy, f.LiftedAt = by, &at
		lifted = append(lifted, *f)
	}
	if len(lifted) == 0 {
		return nil, nil
	}
	if err := m.save(); err != nil {
		m.freezes = before
		return nil, fmt.Errorf("unfreeze %s: %w", Freeze{Module: module, Machine: machine}.Scope(), err)
	}
	return lifted, nil
}

// Freezes implements Catalogue.
func (m *Memory) Freezes(context.Context) ([]Freeze, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Freeze
	for _, f := range m.freezes {
		if f.LiftedAt == nil {
			out = append(out, f)
		}
	}
	return out, nil
}

// convergedOn reports whether entries[i] converged on machine, making
// onSets[i] if it is not there yet. The caller holds mu.
func (m *Memory) convergedOn(i int, machine string) bool {
	for len(m.onSets) < len(m.entries) {
		m.onSets = append(m.onSets, nil)
	}
	if m.onSets[i] == nil {
		set := make(map[string]struct{}, len(m.entries[i].Converged))
		for _, c := range m.entries[i].Converged {
			set[c] = struct{}{}
		}
		m.onSets[i] = set
	}
	_, ok := m.onSets[i][machine]
	return ok
}

func (m *Memory) save() error {
	if m.persist == nil {
		return nil
	}
	return m.persist(m.entries, m.freezes)
}

// OpenFile opens (or creates) a catalogue kept in one JSON file, rewritten
// atomically (temp file, fsync, rename) on every change. It is meant for one
// worker process; share a SQL catalogue between workers.
//
// The file is the list of entries. A rejection is written in its own build's
// entry ("rejected"; in the file that is the build's own rejection, not its
// digest's), so a file written before rejections existed opens unchanged.
// Once a freeze has been taken the file is an object, {"builds": [...],
// "freezes": [...]}, freezes lifted or not; a file that never had one stays
// the list, so files written before freezes existed open unchanged too.
func OpenFile(path string) (*Memory, error) {
	m := NewMemory()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("open catalogue: %w", err)
	default:
		if err := decodeFile(data, m); err != nil {
			return nil, fmt.Errorf("open catalogue %s: %w (move it aside to start an empty one)", path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open catalogue: %w", err)
	}
	m.persist = func(es []Entry, fs []Freeze) error {
		if len(fs) == 0 {
			return writeAtomic(path, es)
		}
		return writeAtomic(path, fileData{Builds: es, Freezes: fs})
	}
	return m, nil
}

// fileData is a File catalogue once it holds freezes.
type fileData struct {
	Builds  []Entry  `json:"builds"`
	Freezes []Freeze `json:"freezes"`
}

// decodeFile reads either form of a File catalogue into m.
func decodeFile(data []byte, m *Memory) error {
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "{") {
		var fd fileData
		if err := json.Unmarshal(data, &fd); err != nil {
			return err
		}
		m.entries, m.freezes = fd.Builds, fd.Freezes
		return nil
	}
	return json.Unmarshal(data, &m.entries)
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
