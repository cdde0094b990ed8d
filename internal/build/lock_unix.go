//go:build unix

package build

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path, waiting for it, so that
// worker processes sharing a repository take turns with its worktree
// bookkeeping as goroutines of one process do. The lock dies with the
// process, so a killed worker never leaves a stale one.
func lockFile(path string) (unlock func(), err error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// lockFileHeld reports whether another process holds path's lock now.
func lockFileHeld(path string) (bool, error) {
	f, err := openLockFile(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	return false, nil
}

// openLockFile opens path, creating it; a lock file another user made
// (a worker in a container and one outside it, say) is opened read-only,
// which flock needs no more than.
func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, os.ErrPermission) {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
