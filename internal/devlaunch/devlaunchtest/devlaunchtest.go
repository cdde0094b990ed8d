// Package devlaunchtest holds what tests that launch a real Temporal dev
// server share: finding the pinned Temporal CLI (or skipping without it),
// and an output buffer the server's pipes and the test both use.
//
// It is an ordinary (non-test) package so that several packages' _test
// files can import it; nothing outside tests should.
package devlaunchtest

import (
	"bytes"
	"os"
	"sync"
	"testing"

	"github.com/meshroll/meshroll/internal/temporalcli"
)

// TemporalCLI is the path of the pinned Temporal CLI, for a test that
// starts a real dev server. It skips the test with -short, and when the
// CLI is missing skips it too, except on CI (CI set), where a missing CLI
// fails it: CI must run these tests. what names the test in the message.
func TemporalCLI(t testing.TB, what string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s starts a Temporal dev server; skipped with -short", what)
	}
	p, err := temporalcli.Path()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v", what, err)
		}
		t.Skipf("%s: %v", what, err)
	}
	return p
}

// Buffer is a bytes.Buffer safe for concurrent use, so that a server's
// output goroutines can write it while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
