// Package devlaunchtest holds what tests that launch a real Temporal dev
// server share: finding the pinned Temporal CLI (or skipping without it).
//
// It is an ordinary (non-test) package so that several packages' _test
// files can import it; nothing outside tests should.
package devlaunchtest

import (
	"os"
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
