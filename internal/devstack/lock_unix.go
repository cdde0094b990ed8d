//go:build unix

package devstack

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockState takes an exclusive lock on the state directory, so that two dev
// stacks never share a Temporal database, a catalogue or host journals. The
// kernel drops the lock when the process dies, so a killed stack leaves no
// stale lock behind.
func lockState(path, stateDir string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state directory %s is in use by another dev stack: stop it, or pass another --state", stateDir)
		}
		return nil, fmt.Errorf("lock state directory %s: %w", stateDir, err)
	}
	return f.Close, nil
}
