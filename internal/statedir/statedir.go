// Package statedir is what a process needs to own a state directory on
// disk: an exclusive lock, so that two processes never write one directory
// (two host agents, two dev stacks), and a durable directory sync, so that a
// rename or a new file survives a crash. Both are no-ops where the platform
// has neither.
package statedir

import "errors"

// ErrLocked says another process holds the lock: callers name the directory
// and what to do, in their own words.
var ErrLocked = errors.New("locked by another process")
