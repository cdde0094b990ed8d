// Package direct is the benchmark's baseline without Temporal: a plain Go
// loop that calls the same builder, catalogue, compose, guard and host API
// the activities call, in the order a plan calls them, against the same
// host agents. What a plan takes beyond what this takes is what meshroll's
// orchestration costs.
package direct

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/meshroll/meshroll/activities"
	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/guard"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Roller rolls builds out directly.
type Roller struct {
	Mesh      *config.Config
	ConfigDir string
	Catalogue catalogue.Catalogue
	Builder   build.Builder
	Hosts     activities.Hosts
	// PollInterval is how often a push reads the host's report while it
	// waits (the bench gives the worker's push activity the same).
	PollInterval time.Duration
}

// Build builds module at commit and records it, as the Build activity does.
func (r *Roller) Build(ctx context.Context, module, commit string) (mesh.Build, error) {
	m, ok := r.Mesh.Modules[module]
	if !ok {
		return mesh.Build{}, fmt.Errorf("direct build: no module %s", module)
	}
	repo := m.Repo
	if !filepath.IsAbs(repo) {
		repo = filepath.Join(r.ConfigDir, repo)
	}
	b, err := r.Builder.Build(ctx, build.Request{
		Module: module, Commit: commit, Repo: repo, Path: m.Path, Kind: m.Builder, Main: m.Main, Branch: m.Branch,
	})
	if err != nil {
		return mesh.Build{}, fmt.Errorf("direct build: %w", err)
	}
	if err := r.Catalogue.Record(ctx, b, "direct"); err != nil {
		return mesh.Build{}, fmt.Errorf("direct build: record: %w", err)
	}
	return b, nil
}

// Roll builds module at commit, then composes and pushes it to every
// machine that runs it, tier by tier, each tier's machines one after the
// other, waiting until each reports it running.
func (r *Roller) Roll(ctx context.Context, module, commit string) error {
	b, err := r.Build(ctx, module, commit)
	if err != nil {
		return err
	}
	targets, err := r.Mesh.Targets(module)
	if err != nil {
		return fmt.Errorf("direct roll: %w", err)
	}
	for _, t := range targets {
		if err := r.Push(ctx, t, b); err != nil {
			return err
		}
	}
	return nil
}

// Push composes the target's declaration (the ComposeTargets activity's own code),
// checks it against the host's report with the guard, sends it with the
// next sequence and waits until the host reports it running.
func (r *Roller) Push(ctx context.Context, t meshapi.Target, b mesh.Build) error {
	acts := &activities.Activities{Mesh: r.Mesh, Catalogue: r.Catalogue, Hosts: r.Hosts}
	composed, err := acts.ComposeTargets(ctx, meshapi.ComposeTargetsInput{Plan: "direct", Targets: []meshapi.Target{t}, Build: b})
	if err != nil {
		return fmt.Errorf("direct compose %s: %w", t.Machine, err)
	}
	res := composed.Results[0]
	if res.Error != "" {
		return fmt.Errorf("direct compose %s: %s", t.Machine, res.Error)
	}
	hc, err := r.Hosts.Host(t.Machine)
	if err != nil {
		return fmt.Errorf("direct push %s: %w", t.Machine, err)
	}
	rep, err := hc.Report(ctx)
	if err != nil {
		return fmt.Errorf("direct push %s: %w", t.Machine, err)
	}
	g, err := guard.Check(guard.Input{
		Declaration: res.Declaration, Module: module(b), Report: rep,
		Lookup: func(digest string) (int64, bool, error) {
			bb, ok, err := r.Catalogue.Lookup(ctx, digest)
			return bb.Generation, ok, err
		},
	})
	if err != nil {
		return fmt.Errorf("direct push %s: %w", t.Machine, err)
	}
	switch g.Decision {
	case guard.AlreadyRunning, guard.Superseded:
		return nil
	case guard.Refused:
		return fmt.Errorf("direct push %s: refused: %s", t.Machine, g.Reason)
	}
	d := g.Declaration
	d.Seq = rep.LastSeq + 1
	d.Plan, d.Request = "direct", fmt.Sprintf("direct-%s-%d", t.Machine, d.Seq)
	if _, err := hc.Apply(ctx, d); err != nil {
		return fmt.Errorf("direct push %s: apply: %w", t.Machine, err)
	}
	tick := time.NewTicker(r.PollInterval)
	defer tick.Stop()
	for {
		rep, err := hc.Report(ctx)
		if err == nil && running(rep, d) {
			return r.Catalogue.MarkConverged(ctx, b.Digest, t.Machine)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("direct push %s: wait running: %w", t.Machine, ctx.Err())
		case <-tick.C:
		}
	}
}

func module(b mesh.Build) string { return b.Module }

func running(rep mesh.Report, d mesh.Declaration) bool {
	if rep.LastSeq < d.Seq {
		return false
	}
	for _, c := range d.Containers {
		r, ok := rep.Running(c.Module)
		if !ok || r.Digest != c.Digest || r.State != mesh.StateRunning {
			return false
		}
	}
	return true
}
