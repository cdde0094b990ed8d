package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// composeBatch is how many machines one ComposeTargets activity composes:
// few enough that its result (every declaration) stays far below the
// payload limits, many enough that a thousand machines cost ten
// activities.
const composeBatch = 100

// compose composes every target's declaration, composeBatch at a time (each
// batch an activity, not a local one, so that its input and result, what
// the plan intends, stay readable in the plan's history), all batches at
// once. The plan records these declarations: that is what it intends. Every
// machine that could not be composed is named in the plan's end. done, when
// not nil, is the composition of all targets (one batch) the build already
// made (BuildAndCompose): it is taken as that batch's result.
func (p *plan) compose(ctx workflow.Context, targets []meshapi.Target, b mesh.Build, done *meshapi.ComposeTargetsResult) (map[string]mesh.Declaration, error) {
	decls := map[string]mesh.Declaration{}
	err := p.step(ctx, func(sctx workflow.Context) error {
		type batch struct {
			targets []meshapi.Target
			f       workflow.Future
		}
		var batches []batch
		for from := 0; from < len(targets); from += composeBatch {
			bt := targets[from:min(from+composeBatch, len(targets))]
			if done != nil {
				f, settable := workflow.NewFuture(sctx)
				settable.SetValue(*done)
				batches = append(batches, batch{bt, f})
				continue
			}
			f := workflow.ExecuteActivity(composeOptions(sctx, p.policy, len(bt)), acts.ComposeTargets,
				meshapi.ComposeTargetsInput{Plan: p.st.Plan, Targets: bt, Build: b})
			batches = append(batches, batch{bt, f})
		}
		var errs []string
		for _, bt := range batches {
			var res meshapi.ComposeTargetsResult
			if err := bt.f.Get(sctx, &res); err != nil {
				for _, t := range bt.targets {
					errs = append(errs, fmt.Sprintf("%s: %s", t.Machine, errorReason(err)))
				}
				continue
			}
			for i, r := range res.Results {
				t := bt.targets[i]
				if r.Error != "" {
					errs = append(errs, fmt.Sprintf("%s: %s", t.Machine, r.Error))
					continue
				}
				decls[t.Machine] = r.Declaration
				if len(r.Unknown) > 0 {
					p.note(t.Machine, strings.Join(r.Unknown, "; "))
				}
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	})
	return decls, p.interrupted(ctx, err, "compose failed for ")
}
