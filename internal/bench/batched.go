package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshroll/meshroll/internal/bench/hist"
	"github.com/meshroll/meshroll/internal/bench/stack"
)

// The batched scenario's min_healthy: long enough that the floor (the
// batches' health waits, one after the other) is most of the plan's time,
// so what the orchestration adds per batch reads off clearly; short enough
// that the smoke size stays a few seconds.
const (
	batchedMinHealthySmoke = 200 * time.Millisecond
	batchedMinHealthyFull  = 500 * time.Millisecond
)

// batchedSize is one tier of machines pushed in batches of maxParallel,
// each machine's module waiting minHealthy.
type batchedSize struct {
	machines    int
	maxParallel int
	minHealthy  time.Duration
}

// batches is how many batches the tier is pushed in.
func (s batchedSize) batches() int { return (s.machines + s.maxParallel - 1) / s.maxParallel }

// floor is the sum of the batches' health waits: a batch starts when the
// previous one is healthy, and a push is healthy no sooner than minHealthy
// after its container runs, so no plan can converge sooner.
func (s batchedSize) floor() time.Duration { return time.Duration(s.batches()) * s.minHealthy }

// batched pushes one tier of machines in batches of max_parallel, every
// module with a non-zero min_healthy, and reads the plan's time (start to
// converged, from its history) against the floor no implementation can
// beat. Under the floor is a bug, not a figure: checkBatched fails the
// bench.
func (b *bench) batched(ctx context.Context, run int) error {
	s := b.sz.batched
	specs := fleetSpecs(fmt.Sprintf("b%dr%d", s.machines, run), s.machines, 1)
	m, err := b.startFleet(ctx, fmt.Sprintf("bench-batched-%d-%d", s.machines, run), specs, stack.MeshOptions{
		MinHealthy: s.minHealthy, MaxParallel: map[int]int{1: s.maxParallel},
	})
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	events, err := b.planFleet(ctx, m)
	if err != nil {
		return err
	}
	whole, batches := hist.Duration(events), tierTimes(events)
	if err := checkBatched(s, whole, batches); err != nil {
		return err
	}
	scenario := fmt.Sprintf("batched %d", s.machines)
	floor, above := s.floor(), whole-s.floor()
	b.t.Add(scenario, "machines, one tier", "", "", float64(s.machines))
	b.t.Add(scenario, fmt.Sprintf("batches (max_parallel %d)", s.maxParallel), "", "", float64(s.batches()))
	b.t.Add(scenario, "min_healthy of the module", "s", "", seconds(s.minHealthy))
	b.t.Add(scenario, "floor: batches × min_healthy", "s", "no plan can be faster", seconds(floor))
	b.t.Add(scenario, "whole plan, start to converged", "s", "below the floor fails the bench", seconds(whole))
	b.t.Add(scenario, "above the floor (whole − floor)", "s", "", seconds(above))
	b.t.Add(scenario, "above the floor per batch", "ms", "", millis(above/time.Duration(s.batches())))
	b.t.Add(scenario, "a batch above min_healthy (mean; hand-out to last answer)", "ms", "fan-out tiers of about the batch's size", millis(meanAbove(batches, s.minHealthy)))
	return nil
}

// meanAbove is the mean of ds less least: what a batch took beyond its
// health wait, without the plan's fixed part (build, compose) that the
// whole plan's time also holds.
func meanAbove(ds []time.Duration, least time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d - least
	}
	return sum / time.Duration(len(ds))
}

// checkBatched fails a batched plan that beat what batching and health
// allow: fewer or more batches than max_parallel makes, a batch (from the
// plan handing it out to its last answer) shorter than min_healthy, or the
// whole plan shorter than the batches' health waits one after the other.
// Any of them means batches overlapped or a push did not wait for health.
func checkBatched(s batchedSize, whole time.Duration, batches []time.Duration) error {
	if len(batches) != s.batches() {
		return fmt.Errorf("the plan pushed %d machines in %d batches, want %d (max_parallel %d)", s.machines, len(batches), s.batches(), s.maxParallel)
	}
	for i, d := range batches {
		if d < s.minHealthy {
			return fmt.Errorf("batch %d of %d took %s, below min_healthy %s: its pushes did not wait for health", i+1, len(batches), d, s.minHealthy)
		}
	}
	if whole < s.floor() {
		return fmt.Errorf("the plan took %s, below its batches' health waits %s (%d × %s): batches overlapped or pushes did not wait for health",
			whole, s.floor(), s.batches(), s.minHealthy)
	}
	return nil
}
