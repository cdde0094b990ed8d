//go:build !unix

package agent

// lockDir is a no-op where flock is not available: running two agents on
// one state directory there is the operator's mistake to avoid.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }

// syncDir is a no-op where directories cannot be synced; renames there are
// as durable as the platform makes them.
func syncDir(string) error { return nil }
