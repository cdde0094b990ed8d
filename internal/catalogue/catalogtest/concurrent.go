package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

func testSharedVisibility(t *testing.T, a, b catalogue.Catalogue) {
	record(t, a, Build("host", 1), "plan/a")
	expect(t, "Lookup via the other handle", b.Lookup, Build("host", 1).Digest, Build("host", 1))
	record(t, b, Build("host", 1), "plan/b") // same build from the other worker: no-op
	other := Build("host", 1)
	other.Digest = Build("host", 2).Digest
	if err := b.Record(t.Context(), other, "plan/b"); !errors.Is(err, catalogue.ErrNotReproducible) {
		t.Fatalf("conflicting digest via the other handle: err = %v, want not reproducible", err)
	}
	markConverged(t, b, Build("host", 1).Digest, "edge-1")
	expect(t, "NewestConverged via the first handle", a.NewestConverged, "host", Build("host", 1))
	expectOn(t, a, "host", "edge-1", Build("host", 1))
	es := builds(t, a, "host", 0)
	if len(es) != 1 || es[0].Plan != "plan/a" || !slices.Equal(es[0].Converged, []string{"edge-1"}) {
		t.Fatalf("Builds = %+v; want one entry by plan/a converged on edge-1", es)
	}
	r := reject(t, a, Build("host", 1), "alice", "crashes on start")
	expectRejected(t, b, Build("host", 1).Digest, &r)
	if again := reject(t, b, Build("host", 1), "bob", "again"); !sameRejection(again, r) {
		t.Fatalf("rejecting again via the other handle = %+v, want the first %+v", again, r)
	}
	expect(t, "NewestConverged via the other handle", b.NewestConverged, "host", mesh.Build{})
}

// Parallel runs fn(i, handle) for i in [0, n) at once, each goroutine on one
// of cs in turn, and fails the test with every error. It is exported for
// implementations' own races (two pools of one store, say), so that they
// start their goroutines together and report errors as the suite does.
func Parallel(t *testing.T, cs []catalogue.Catalogue, n int, fn func(ctx context.Context, i int, c catalogue.Catalogue) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if err := fn(t.Context(), i, cs[i%len(cs)]); err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// shuffled returns gens 1..n in an order that differs per goroutine.
func shuffled(n int, seed int) []int64 {
	gens := make([]int64, n)
	for i := range gens {
		gens[i] = int64(i + 1)
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x6d657368))
	r.Shuffle(len(gens), func(i, j int) { gens[i], gens[j] = gens[j], gens[i] })
	return gens
}

// checkExactly fails unless every handle lists exactly want (by generation,
// newest first), each with its own build.
func checkExactly(t *testing.T, cs []catalogue.Catalogue, module string, want []int64) {
	t.Helper()
	slices.Sort(want)
	slices.Reverse(want)
	for h, c := range cs {
		es := builds(t, c, module, 0)
		if got := generations(es); !slices.Equal(got, want) {
			t.Fatalf("handle %d: Builds(%s) has %d entries %v, want %d %v", h, module, len(got), got, len(want), want)
		}
		for _, e := range es {
			if e.Build != Build(module, e.Build.Generation) {
				t.Fatalf("handle %d: entry %+v, want %+v", h, e.Build, Build(module, e.Build.Generation))
			}
		}
	}
}

// testConcurrentSame has every goroutine record the same builds: half of
// them in one order (so that they collide on every build, as retried
// activities do), half each in its own.
func testConcurrentSame(t *testing.T, cs []catalogue.Catalogue) {
	Parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		order := shuffled(sharedBuildCount, i)
		if i%2 == 0 {
			slices.Sort(order)
		}
		for _, gen := range order {
			if err := c.Record(ctx, Build("host", gen), fmt.Sprintf("plan/%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	want := shuffled(sharedBuildCount, 0)
	checkExactly(t, cs, "host", want)
}

func testConcurrentDifferent(t *testing.T, cs []catalogue.Catalogue) {
	Parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		for k := range buildsPerWorker {
			gen := int64(i*buildsPerWorker + k + 1)
			if err := c.Record(ctx, Build("host", gen), fmt.Sprintf("plan/%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	checkExactly(t, cs, "host", shuffled(workers*buildsPerWorker, 0))
}

// testConcurrentMixed has every goroutine record the shared builds and its
// own, in its own order, and mark each shared build converged on its own
// machine, all at once.
func testConcurrentMixed(t *testing.T, cs []catalogue.Catalogue) {
	const ownBase = 1000
	Parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		machine := fmt.Sprintf("edge-%d", i)
		for k, gen := range shuffled(sharedBuildCount, i) {
			b := Build("host", gen)
			if err := c.Record(ctx, b, fmt.Sprintf("plan/%d", i)); err != nil {
				return err
			}
			if err := c.MarkConverged(ctx, b.Digest, machine); err != nil {
				return err
			}
			if k < buildsPerWorker {
				if err := c.Record(ctx, Build("host", int64(ownBase+i*buildsPerWorker+k)), machine); err != nil {
					return err
				}
			}
			if _, ok, err := c.Lookup(ctx, b.Digest); err != nil || !ok {
				return fmt.Errorf("look up a build just recorded: found %v, err %v", ok, err)
			}
		}
		return nil
	})
	want := shuffled(sharedBuildCount, 0)
	for i := range workers * buildsPerWorker {
		want = append(want, int64(ownBase+i))
	}
	checkExactly(t, cs, "host", want)
	var machines []string
	for i := range workers {
		machines = append(machines, fmt.Sprintf("edge-%d", i))
	}
	for h, c := range cs {
		for _, e := range builds(t, c, "host", 0) {
			want := machines
			if e.Build.Generation >= ownBase {
				want = nil
			}
			if got := sorted(e.Converged); !slices.Equal(got, sorted(want)) {
				t.Fatalf("handle %d: generation %d converged on %v, want %v", h, e.Build.Generation, got, want)
			}
		}
		expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", sharedBuildCount))
		for _, machine := range machines {
			expectOn(t, c, "host", machine, Build("host", sharedBuildCount))
		}
		expectOn(t, c, "host", "edge-unmarked", mesh.Build{})
	}
}

// testConcurrentReject has every goroutine reject one build that all share,
// each with its own words, and one of a few others: every build ends with
// one rejection, and every caller was answered with it.
func testConcurrentReject(t *testing.T, cs []catalogue.Catalogue) {
	const others = 3
	recordUpTo(t, cs[0], "host", 1+others)
	for gen := int64(1); gen <= 1+others; gen++ {
		markConverged(t, cs[0], Build("host", gen).Digest, "edge-1")
	}
	got := make([][2]catalogue.Rejection, workers)
	Parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		for k, gen := range []int64{1, int64(2 + i%others)} {
			b := Build("host", gen)
			r, err := c.Reject(ctx, b.Module, b.Commit, fmt.Sprintf("op-%d", i), fmt.Sprintf("reason %d", i))
			if err != nil {
				return err
			}
			got[i][k] = r
		}
		return nil
	})
	first := map[int64]catalogue.Rejection{}
	for i := range workers {
		for k, gen := range []int64{1, int64(2 + i%others)} {
			r := got[i][k]
			if r.Commit != Build("host", gen).Commit {
				t.Fatalf("goroutine %d rejecting generation %d was answered %+v", i, gen, r)
			}
			if f, ok := first[gen]; !ok {
				first[gen] = r
			} else if !sameRejection(f, r) {
				t.Fatalf("generation %d: answered %+v and %+v; want one rejection", gen, f, r)
			}
		}
	}
	for h, c := range cs {
		for gen, r := range first {
			expectRejected(t, c, Build("host", gen).Digest, &r)
		}
		for _, e := range builds(t, c, "host", 0) {
			if r, ok := first[e.Build.Generation]; !ok || e.Rejected == nil || !sameRejection(*e.Rejected, r) {
				t.Fatalf("handle %d: generation %d shows %+v, want %+v", h, e.Build.Generation, e.Rejected, r)
			}
		}
		expect(t, "NewestConverged", c.NewestConverged, "host", mesh.Build{})
		expectOn(t, c, "host", "edge-1", mesh.Build{})
	}
}

func sorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// testConcurrentUnfreeze has every goroutine take a freeze of one scope,
// then all lift it at once: every freeze is lifted by exactly one caller.
func testConcurrentUnfreeze(t *testing.T, cs []catalogue.Catalogue) {
	Parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		_, err := c.Freeze(ctx, "host", "", fmt.Sprintf("op-%d", i), fmt.Sprintf("reason %d", i))
		return err
	})
	var mu sync.Mutex
	lifted := map[int64]int{}
	Parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		got, err := c.Unfreeze(ctx, "host", "", fmt.Sprintf("op-%d", i))
		mu.Lock()
		defer mu.Unlock()
		for _, f := range got {
			lifted[f.ID]++
		}
		return err
	})
	if len(lifted) != workers {
		t.Fatalf("%d freezes lifted; want %d", len(lifted), workers)
	}
	for id, n := range lifted {
		if n != 1 {
			t.Errorf("freeze %d lifted by %d callers; want one", id, n)
		}
	}
	for _, c := range cs {
		expectFreezes(t, c)
	}
}
