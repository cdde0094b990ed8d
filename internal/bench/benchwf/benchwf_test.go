package benchwf

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWindowedKeepsAtMostSizePending(t *testing.T) {
	for _, tc := range []struct{ n, size int }{{0, 3}, {2, 3}, {3, 3}, {10, 3}, {2500, MaxPending}} {
		started, waited := make([]bool, tc.n), make([]bool, tc.n)
		pending, most := 0, 0
		err := windowed(tc.n, tc.size,
			func(i int) {
				started[i] = true
				pending++
				most = max(most, pending)
			},
			func(i int) error {
				require.True(t, started[i], "waited for %d before starting it", i)
				require.False(t, waited[i], "waited for %d twice", i)
				waited[i] = true
				pending--
				return nil
			})
		require.NoError(t, err)
		assert.LessOrEqual(t, most, tc.size, "n=%d", tc.n)
		assert.Equal(t, min(tc.n, tc.size), most, "n=%d: the window is used to its size", tc.n)
		assert.NotContains(t, waited, false, "n=%d: every one waited for", tc.n)
	}
}

func TestWindowedStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	starts := 0
	err := windowed(10, 3, func(int) { starts++ }, func(i int) error {
		if i == 1 {
			return boom
		}
		return nil
	})
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, 4, starts, "nothing is started after the failed wait")
}
