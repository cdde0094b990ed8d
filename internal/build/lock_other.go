//go:build !unix

package build

// lockFile is a no-op where flock is missing: worker processes sharing a
// repository there are not kept apart (goroutines of one process still are).
func lockFile(string) (func(), error) { return func() {}, nil }

func lockFileHeld(string) (bool, error) { return false, nil }
