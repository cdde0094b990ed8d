package activities

import (
	"context"
	"fmt"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// PlanPushedModules is the Receive workflow's one activity: for a push the
// merge receiver took, it fetches each module's clone from its origin,
// finds which of the modules' paths the pushed commits touch (the diff of
// the branch's head before the push and after it), and starts one plan per
// touched module at the pushed head through plans.Start, the code starter
// merge runs, so that the plan's ID and options are the merge's and a
// re-delivered event or a manual merge of the same commit finds the plan
// already started. When the head before the push is unknown (a new branch)
// or the clone lacks it, every module counts as touched: a plan that finds
// nothing to change ends superseded, while a plan not started is a merge
// lost. A fetch that fails, or a clone that still lacks the pushed head,
// is an error the workflow retries.
func (a *Activities) PlanPushedModules(ctx context.Context, in meshapi.ReceiveInput) (meshapi.ReceiveResult, error) {
	if err := in.Validate(); err != nil {
		return meshapi.ReceiveResult{}, permanent(meshapi.ErrInvalidInput, "%v", err)
	}
	cfg := a.Mesh.Current()
	var res meshapi.ReceiveResult
	changed := map[string][]string{} // by clone directory; nil: everything
	for _, name := range in.Modules {
		if err := a.knownModule(name); err != nil {
			return meshapi.ReceiveResult{}, err
		}
		m := cfg.Modules[name]
		dir, local := m.RepoDir(a.ConfigDir)
		if !local {
			return meshapi.ReceiveResult{}, permanent(meshapi.ErrInvalidInput, "%s", m.URLRepoProblem(name))
		}
		paths, seen := changed[dir]
		if !seen {
			var err error
			if paths, err = a.pushedPaths(ctx, dir, in); err != nil {
				return meshapi.ReceiveResult{}, err
			}
			changed[dir] = paths
		}
		if paths != nil && !build.Touches(m.Path, paths) {
			res.Untouched = append(res.Untouched, name)
			continue
		}
		res.Everything = res.Everything || paths == nil
		started, err := plans.Start(ctx, a.Temporal, cfg.Temporal.TaskQueue,
			meshapi.PlanInput{Module: name, Commit: in.After, Policy: cfg.PushPolicy()})
		if err != nil {
			return meshapi.ReceiveResult{}, err
		}
		a.Log.Info().Str("provider", in.Provider).Str("delivery", in.Delivery).Str("module", name).
			Str("commit", in.After).Str("plan", started.ID).Bool("existing", started.Existing).Msg("push received: plan started")
		res.Plans = append(res.Plans, meshapi.ReceivedPlan{Module: name, Plan: started.ID, Existing: started.Existing})
	}
	return res, nil
}

// pushedPaths fetches the clone at dir and lists the files the push
// changed; nil (everything) when the head before it is unknown or not in
// the clone.
func (a *Activities) pushedPaths(ctx context.Context, dir string, in meshapi.ReceiveInput) ([]string, error) {
	if err := build.Fetch(ctx, dir, in.Branch); err != nil {
		return nil, fmt.Errorf("fetch the clone %s: %w", dir, err)
	}
	if !build.HasCommit(ctx, dir, in.After) {
		return nil, fmt.Errorf("the clone %s lacks the pushed head %s of %s after fetching its origin", dir, in.After, in.Branch)
	}
	if in.Before == "" || !build.HasCommit(ctx, dir, in.Before) {
		return nil, nil
	}
	paths, err := build.ChangedPaths(ctx, dir, in.Before, in.After)
	if err != nil {
		return nil, err
	}
	if paths == nil {
		paths = []string{}
	}
	return paths, nil
}
