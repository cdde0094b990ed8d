package machines

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// A page of the journal says where the next older page starts, so that a
// person can page back to the first entry and no further.
func TestJournalPages(t *testing.T) {
	url, asked := fakeHost(t, mesh.Report{Machine: "edge-1"}, 45)
	m := config.Machine{Host: url}
	for _, tc := range []struct {
		name       string
		before     uint64
		n          int
		first      uint64
		count      int
		nextBefore uint64
		asked      []string
	}{
		{name: "newest page", n: 20, first: 45, count: 20, nextBefore: 26, asked: []string{"limit=20"}},
		{name: "a middle page", before: 26, n: 20, first: 25, count: 20, nextBefore: 6, asked: []string{"before=26&limit=20"}},
		{name: "the oldest page is short", before: 6, n: 20, first: 5, count: 5, asked: []string{"before=6&limit=20"}},
		{name: "a page ending on the first entry has nothing older", before: 21, n: 20, first: 20, count: 20, asked: []string{"before=21&limit=20"}},
		{name: "more than the host's page size", n: 150, first: 45, count: 45, asked: []string{"limit=100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*asked = nil
			p, err := Journal(context.Background(), "edge-1", m, tc.before, tc.n)
			require.NoError(t, err)
			require.Len(t, p.Entries, tc.count)
			assert.Equal(t, tc.first, p.Entries[0].Index, "newest first")
			assert.Equal(t, tc.nextBefore, p.NextBefore)
			assert.Equal(t, tc.asked, *asked)
		})
	}
}

func TestJournalOfADeadHost(t *testing.T) {
	p, err := Journal(context.Background(), "edge-1", config.Machine{Host: dead}, 0, 20)
	require.Error(t, err)
	assert.True(t, host.IsUnreachable(err))
	assert.Contains(t, err.Error(), "journal: host "+dead+" unreachable: ")
	assert.Equal(t, []JournalEntry{}, p.Entries)
}
