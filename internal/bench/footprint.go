package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshroll/meshroll/internal/bench/stack"
)

// footprint runs p plans at once (p machines, each running its own
// module), with the worker in a process of its own, and reads that
// process's peak RSS and CPU time from /proc.
func (b *bench) footprint(ctx context.Context, run int) error {
	p := b.sz.footprint
	specs := make([]stack.MachineSpec, p)
	mods := make([]string, p)
	for i := range specs {
		mods[i] = fmt.Sprintf("p%03d", i)
		specs[i] = stack.MachineSpec{Name: fmt.Sprintf("p%dr%d-h%03d", p, run, i), Tier: 1, Modules: []string{mods[i]}}
	}
	m, err := stack.NewMesh(ctx, b.srv, stack.MeshOptions{
		TaskQueue: fmt.Sprintf("bench-footprint-%d", run), Machines: specs, Modules: mods, Log: b.log,
	})
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	pprofDir := ""
	if run == 0 {
		pprofDir = b.o.Pprof
	}
	wp, err := m.StartWorkerProcess(ctx, pprofDir)
	if err != nil {
		return err
	}
	defer func() { _ = wp.Stop() }()
	commit, err := m.Commit(ctx)
	if err != nil {
		return err
	}
	before, err := stack.ReadUsage(wp.Pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	c := b.srv.Client()
	if _, err := rollOut(ctx, c, m, mods, commit); err != nil {
		return err
	}
	wall := time.Since(t0)
	after, err := stack.ReadUsage(wp.Pid())
	if err != nil {
		return err
	}
	if err := wp.Stop(); err != nil {
		return err
	}
	scenario := fmt.Sprintf("footprint %d", p)
	b.t.Add(scenario, fmt.Sprintf("worker process peak RSS (VmHWM), %d plans in flight", p), "MiB", "", float64(after.PeakRSSBytes)/(1<<20))
	b.t.Add(scenario, "worker CPU per plan (user+system)", "ms", "", millis((after.CPU-before.CPU)/time.Duration(p)))
	b.t.Add(scenario, "plans converged per second", "/s", "engine: one-activity workflows/s below", float64(p)/wall.Seconds())
	return nil
}
