//go:build unix

package dockertest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// networkLock is the file whose lock keeps the bridge engine's containers
// and a browser's page loads apart, across the test binaries of one run
// (see HoldQuietNetwork).
var networkLock = filepath.Join(os.TempDir(), "meshroll-test-network.lock")

// holdNetwork takes networkLock, exclusive or shared, until release or the
// test's end.
func holdNetwork(t testing.TB, exclusive bool) (release func()) {
	t.Helper()
	f, err := os.OpenFile(networkLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("open %s: %v", networkLock, err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		_ = f.Close()
		t.Fatalf("lock %s: %v", networkLock, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = f.Close() }) } // closing drops the lock
	t.Cleanup(release)
	return release
}
