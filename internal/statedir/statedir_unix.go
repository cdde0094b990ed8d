//go:build unix

package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Lock takes an exclusive, non-blocking flock on the file at path (created
// when missing) and returns what releases it. The kernel drops the lock when
// the process dies, so a crashed owner never leaves a stale one. An error
// wrapping ErrLocked means another process holds it.
func Lock(path string) (release func() error, err error) {
	f, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	return func() error { return unlock(f) }, nil
}

// lockFile opens path and takes its flock.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// unlock releases the flock before closing the file. Closing alone is not
// enough: a child this process forks at that moment holds a copy of the
// descriptor until it execs, and the lock with it, so an owner opened
// again in the same process would find it taken.
func unlock(f *os.File) error {
	uerr := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if uerr != nil {
		uerr = fmt.Errorf("unlock %s: %w", f.Name(), uerr)
	}
	return errors.Join(uerr, f.Close())
}

// Sync makes a rename or a new file in dir durable. File systems that cannot
// sync a directory (EINVAL) are taken as they are.
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
