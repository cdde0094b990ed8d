// Package parallel runs the same call over many items with a bound on how
// many run at once: the shape of every fan-out to hosts, machine workflows
// or histories, which must hide round trips without swamping the other
// side.
package parallel

import (
	"errors"
	"sync"
)

// Each calls fn(i) for every i in [0, n), at most limit at a time, and
// returns every failure joined. It never stops early: each item is one
// machine or host, and one that fails must not leave the others untried.
func Each(n, limit int, fn func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
