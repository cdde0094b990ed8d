//go:build !unix

package dockertest

import "testing"

// holdNetwork holds nothing where there is no flock: the docker tests run
// on Linux.
func holdNetwork(testing.TB, bool) (release func()) { return func() {} }
