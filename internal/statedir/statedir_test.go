//go:build unix

package statedir

import (
	"errors"
	"path/filepath"
	"syscall"
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

// A released lock is free at once even while a copy of its descriptor
// lives on, as in a child the process forked that has not exec'd yet (a
// test restarting an agent on its directory once found it still taken).
func TestReleaseFreesTheLockWhileACopyOfItsDescriptorLives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := lockFile(path)
	require.NoError(t, err)
	child, err := syscall.Dup(int(f.Fd()))
	require.NoError(t, err)
	defer syscall.Close(child)
	require.NoError(t, unlock(f))
	release, err := Lock(path)
	require.NoError(t, err, "the lock outlived its release")
	require.NoError(t, release())
}

func TestSync(t *testing.T) {
	require.NoError(t, Sync(t.TempDir()))
	require.Error(t, Sync(filepath.Join(t.TempDir(), "missing")))
}
