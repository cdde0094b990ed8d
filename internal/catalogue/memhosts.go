package catalogue

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// RecordHostReport implements Catalogue.
func (m *Memory) RecordHostReport(_ context.Context, machine string, rep mesh.Report, rev uint64, at time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.host(machine)
	if h.Report != nil && rev != 0 && rev <= h.Revision {
		return false, nil
	}
	rep.Containers = slices.Clone(rep.Containers)
	h.Report, h.Revision, h.ChangedAt = &rep, rev, at.UTC()
	heard(&h, at)
	m.hosts[machine] = h
	return true, nil
}

// HostsHeard implements Catalogue.
func (m *Memory) HostsHeard(_ context.Context, machines []string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range machines {
		if h, ok := m.hosts[name]; ok && h.Report != nil {
			heard(&h, at)
			m.hosts[name] = h
		}
	}
	return nil
}

// RecordHostError implements Catalogue.
func (m *Memory) RecordHostError(_ context.Context, machine, msg string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.host(machine)
	at = at.UTC()
	if !h.HeardAt.IsZero() && !at.After(h.HeardAt) {
		return nil
	}
	if h.ErrorSince == nil {
		h.ErrorSince = &at
	}
	h.Error, h.ErrorAt = msg, &at
	m.hosts[machine] = h
	return nil
}

// HostStates implements Catalogue.
func (m *Memory) HostStates(context.Context) ([]HostState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Collect(maps.Values(m.hosts))
	slices.SortFunc(out, func(a, b HostState) int { return cmp.Compare(a.Machine, b.Machine) })
	return out, nil
}

// host is machine's state, a new one when it has none.
func (m *Memory) host(machine string) HostState {
	if m.hosts == nil {
		m.hosts = map[string]HostState{}
	}
	h, ok := m.hosts[machine]
	if !ok {
		h.Machine = machine
	}
	return h
}

// heard moves h's heard time on to at (never back) and clears an error
// from before it.
func heard(h *HostState, at time.Time) {
	at = at.UTC()
	if at.After(h.HeardAt) {
		h.HeardAt = at
	}
	if h.ErrorAt != nil && at.After(*h.ErrorAt) {
		h.Error, h.ErrorSince, h.ErrorAt = "", nil, nil
	}
}

// KeepMachineFeed implements Catalogue.
func (m *Memory) KeepMachineFeed(_ context.Context, asOf time.Time, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case asOf.Before(m.feedAsOf):
	case body != nil:
		m.feed, m.feedAsOf = slices.Clone(body), asOf.UTC()
	case m.feed != nil:
		m.feedAsOf = asOf.UTC()
	}
	return nil
}

// MachineFeed implements Catalogue.
func (m *Memory) MachineFeed(context.Context) (time.Time, []byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.feedAsOf, slices.Clone(m.feed), m.feed != nil, nil
}
