//go:build !unix

package statedir

// Lock does not lock where flock is missing: running two owners of one
// directory there is the operator's mistake to avoid.
func Lock(string) (func() error, error) { return func() error { return nil }, nil }

// Sync is a no-op where directories cannot be synced; renames there are as
// durable as the platform makes them.
func Sync(string) error { return nil }
