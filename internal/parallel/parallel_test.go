package parallel

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEachCallsEveryItemOnceWithinTheLimit(t *testing.T) {
	for _, tc := range []struct{ n, limit int }{{0, 4}, {1, 4}, {10, 1}, {100, 4}, {5, 0}} {
		var mu sync.Mutex
		seen := make([]int, tc.n)
		running, most := 0, 0
		release := make(chan struct{})
		go func() {
			// Let the calls pile up against the limit before any ends.
			for range tc.n {
				release <- struct{}{}
			}
		}()
		err := Each(tc.n, tc.limit, func(i int) error {
			mu.Lock()
			seen[i]++
			running++
			most = max(most, running)
			mu.Unlock()
			<-release
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		})
		require.NoError(t, err)
		for i, k := range seen {
			assert.Equal(t, 1, k, "n=%d: item %d called once", tc.n, i)
		}
		assert.LessOrEqual(t, most, max(tc.limit, 1), "n=%d limit=%d", tc.n, tc.limit)
	}
}

func TestEachTriesEveryItemAndJoinsTheFailures(t *testing.T) {
	boom1, boom7 := errors.New("boom 1"), errors.New("boom 7")
	var mu sync.Mutex
	calls := 0
	err := Each(10, 3, func(i int) error {
		mu.Lock()
		calls++
		mu.Unlock()
		switch i {
		case 1:
			return boom1
		case 7:
			return boom7
		}
		return nil
	})
	assert.ErrorIs(t, err, boom1)
	assert.ErrorIs(t, err, boom7)
	assert.Equal(t, 10, calls, "a failure does not stop the others")
}
