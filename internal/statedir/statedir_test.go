//go:build unix

package statedir

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLockExcludesASecondOwner: the lock is what keeps two agents (or two
// dev stacks) from writing one state directory.
func TestLockExcludesASecondOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	release, err := Lock(path)
	require.NoError(t, err)
	_, err = Lock(path)
	require.True(t, errors.Is(err, ErrLocked), "second lock: %v", err)
	require.NoError(t, release())
	release, err = Lock(path)
	require.NoError(t, err)
	require.NoError(t, release())
}

func TestSync(t *testing.T) {
	require.NoError(t, Sync(t.TempDir()))
	require.Error(t, Sync(filepath.Join(t.TempDir(), "missing")))
}
