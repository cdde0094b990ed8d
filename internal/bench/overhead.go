package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshroll/meshroll/internal/bench/direct"
	"github.com/meshroll/meshroll/internal/bench/stack"
	"github.com/meshroll/meshroll/internal/build"
)

// overhead is merge-to-converged for one machine through a plan, against
// the same build, compose, push and wait called from a plain loop: once
// with a Go build the build cache already holds (the same program at a new
// commit, pushed to the embedded registry), once with the git-digest build
// (a lookup), which leaves the orchestration bare.
func (b *bench) overhead(ctx context.Context, run int) error {
	if err := b.overheadWith(ctx, run, "go", "cached Go build", &build.Go{Options: build.Options{Registry: b.reg}}); err != nil {
		return err
	}
	return b.overheadWith(ctx, run, "git", "git-digest build", build.GitDigest{})
}

func (b *bench) overheadWith(ctx context.Context, run int, tag, what string, builder build.Builder) error {
	machine := fmt.Sprintf("o%s%d-m1", tag, run)
	m, err := stack.NewMesh(ctx, b.srv, stack.MeshOptions{
		TaskQueue: fmt.Sprintf("bench-overhead-%s-%d", tag, run),
		Machines:  []stack.MachineSpec{{Name: machine, Tier: 1, Modules: []string{"app"}}},
		Modules:   []string{"app"},
		Builder:   builder,
		Log:       b.log,
	})
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	if err := m.StartWorker(ctx); err != nil {
		return err
	}
	deps := m.Deps()
	r := &direct.Roller{Mesh: m.Config, ConfigDir: m.Repo, Catalogue: deps.Catalogue, Builder: deps.Builder, Hosts: deps.Hosts, PollInterval: stack.PollInterval}

	// Warm the Go build cache and the connections: the figure is about
	// a cached build.
	warm, err := m.Commit(ctx)
	if err != nil {
		return err
	}
	if err := r.Roll(ctx, "app", warm); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	c1, err := m.Commit(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := r.Roll(ctx, "app", c1); err != nil {
		return err
	}
	directTime := time.Since(t0)

	c2, err := m.Commit(ctx)
	if err != nil {
		return err
	}
	t0 = time.Now()
	if _, err := rollOut(ctx, b.srv.Client(), m, []string{"app"}, c2); err != nil {
		return err
	}
	planTime := time.Since(t0)

	scenario := "overhead, " + what
	b.t.Add(scenario, "plan, merge to converged (1 machine)", "ms", "", millis(planTime))
	b.t.Add(scenario, "direct loop, same build/compose/push/wait, no Temporal", "ms", "baseline", millis(directTime))
	b.t.Add(scenario, "added by the orchestration (plan − direct)", "ms", "", millis(planTime-directTime))
	b.t.Add(scenario, "ratio plan / direct", "×", "target ≤ 1.2", planTime.Seconds()/directTime.Seconds())
	return nil
}
