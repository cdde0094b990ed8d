package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/parallel"
)

// ComposeTargets composes every target's declaration (see compose), several
// at a time, in one activity: a plan across a thousand machines then
// records a handful of activities instead of a thousand. A target that
// fails permanently is named in its result; a transient failure of any
// target fails the batch, which is retried whole (composing is a read, so a
// retry is harmless). Called outside an activity (the bench's direct
// baseline), it composes the same without heartbeating.
func (a *Activities) ComposeTargets(ctx context.Context, in meshapi.ComposeTargetsInput) (meshapi.ComposeTargetsResult, error) {
	out := meshapi.ComposeTargetsResult{Results: make([]meshapi.ComposedTarget, len(in.Targets))}
	var mu sync.Mutex
	done := 0
	err := parallel.Each(len(in.Targets), fanOut, func(i int) error {
		res, err := a.compose(ctx, in.Plan, in.Targets[i], in.Build)
		var appErr *temporal.ApplicationError
		switch {
		case err == nil:
			out.Results[i].ComposeResult = res
		case errors.As(err, &appErr) && appErr.NonRetryable():
			out.Results[i].Error = appErr.Message()
		default:
			return err
		}
		if activity.IsActivity(ctx) {
			mu.Lock()
			done++
			activity.RecordHeartbeat(ctx, done)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return meshapi.ComposeTargetsResult{}, fmt.Errorf("compose %d machines: %w", len(in.Targets), err)
	}
	return out, nil
}

// compose writes what the plan intends for one machine: its own module
// pinned to the plan's build, every other module as the machine runs it now,
// and a module the machine lacks at that module's newest build that has
// converged somewhere.
func (a *Activities) compose(ctx context.Context, plan string, t meshapi.Target, own mesh.Build) (meshapi.ComposeResult, error) {
	_, rep, err := a.report(ctx, t.Machine)
	if err != nil {
		return meshapi.ComposeResult{}, fmt.Errorf("compose %s: %w", t.Machine, err)
	}
	d := mesh.Declaration{Machine: t.Machine, Plan: plan}
	var unknown []string
	for _, name := range t.Modules {
		if name == own.Module {
			c, err := a.container(own, t.Machine)
			if err != nil {
				return meshapi.ComposeResult{}, err
			}
			d.Containers = append(d.Containers, c)
			continue
		}
		if r, ok := rep.Running(name); ok {
			c := r.Declared()
			b, known, err := a.Catalogue.Lookup(ctx, r.Digest)
			if err != nil {
				return meshapi.ComposeResult{}, fmt.Errorf("compose %s: look up %s: %w", t.Machine, name, err)
			}
			if known {
				c.Generation = b.Generation
			} else {
				// Never guessed: the host's own claim is not a generation. The
				// push refuses it unless an operator forces it.
				c.Generation = 0
				unknown = append(unknown, fmt.Sprintf("%s runs %s at %s, which the catalogue does not know", t.Machine, name, r.Digest))
			}
			d.Containers = append(d.Containers, c)
			continue
		}
		b, ok, err := a.Catalogue.NewestConverged(ctx, name)
		if err != nil {
			return meshapi.ComposeResult{}, fmt.Errorf("compose %s: newest converged %s: %w", t.Machine, name, err)
		}
		if ok {
			c, err := a.container(b, t.Machine)
			if err != nil {
				return meshapi.ComposeResult{}, err
			}
			d.Containers = append(d.Containers, c)
		}
	}
	return meshapi.ComposeResult{Declaration: d, Unknown: unknown}, nil
}

// container is a build as declared on machine: its module's settings and
// health check, and the module's env with the machine's over it (the
// machine's value wins), so that what differs by machine needs no module
// of its own. A module whose settings do not read (a config that was
// never validated) fails the plan there, naming the key: it cannot be
// declared as meant.
func (a *Activities) container(b mesh.Build, machine string) (mesh.Container, error) {
	cfg := a.Mesh.Current()
	m := cfg.Modules[b.Module]
	h := m.HealthCheck()
	settings, err := m.Settings()
	if err != nil {
		return mesh.Container{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("module %s: %v; fix modules.%s in the mesh config", b.Module, err, b.Module), meshapi.ErrInvalidInput, err)
	}
	return mesh.Container{
		Module: b.Module, Digest: b.Digest, Generation: b.Generation, Commit: b.Commit,
		Image: b.Image, Args: m.Args, Env: mergeEnv(m.Env, cfg.Machines[machine].Env), Health: &h, Network: m.Network,
		Settings: settings,
	}, nil
}

// mergeEnv is module's env with machine's over it: module itself when the
// machine adds nothing, else a new map.
func mergeEnv(module, machine map[string]string) map[string]string {
	if len(machine) == 0 {
		return module
	}
	out := make(map[string]string, len(module)+len(machine))
	maps.Copy(out, module)
	maps.Copy(out, machine)
	return out
}
