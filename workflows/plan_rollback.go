package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// rollbackTarget is a rollback plan's step in place of the build: the
// RollbackTarget activity resolves the build to put back and the machines
// above it (rejecting the builds rolled back from), and the plan narrows
// its tiers and targets to those machines.
func (p *plan) rollbackTarget(ctx workflow.Context, targets []meshapi.Target) (mesh.Build, []meshapi.Target, error) {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Machine
	}
	var res meshapi.RollbackTargetResult
	err := p.step(ctx, func(sctx workflow.Context) error {
		return workflow.ExecuteActivity(rollbackOptions(sctx, p.policy, "find what to roll "+p.in.Module+" back to"), acts.RollbackTarget, meshapi.RollbackTargetInput{
			Plan: p.st.Plan, Module: p.in.Module, Rollback: *p.in.Rollback, Machines: names,
		}).Get(sctx, &res)
	})
	if err := p.targetRefused(ctx, err, "rollback"); err != nil {
		return mesh.Build{}, nil, err
	}
	p.setCommit(ctx, res.Build.Commit)
	if len(res.From) > 0 {
		var from []string
		for _, b := range res.From {
			from = append(from, fmt.Sprintf("generation %d (%s)", b.Generation, mesh.ShortCommit(b.Commit)))
		}
		p.st.RolledBackFrom = strings.Join(from, ", ")
	}
	return res.Build, p.narrow(targets, res.Machines), nil
}

// syncTarget is a sync's step in place of the build: the SyncTarget
// activity names the newest build of the module that ran healthy somewhere
// and is not rejected, and the plan narrows itself to the one machine.
func (p *plan) syncTarget(ctx workflow.Context, targets []meshapi.Target) (mesh.Build, []meshapi.Target, error) {
	var b mesh.Build
	err := p.step(ctx, func(sctx workflow.Context) error {
		return workflow.ExecuteActivity(rollbackOptions(sctx, p.policy, "find the newest healthy build of "+p.in.Module), acts.SyncTarget,
			meshapi.SyncTargetInput{Module: p.in.Module, Machine: p.in.Sync.Machine, Remove: p.in.Sync.Remove}).Get(sctx, &b)
	})
	if err := p.targetRefused(ctx, err, "sync"); err != nil {
		return mesh.Build{}, nil, err
	}
	p.setCommit(ctx, b.Commit)
	return b, p.narrow(targets, []string{p.in.Sync.Machine}), nil
}

// targetRefused ends a rollback or sync whose target the worker refused
// for good (unknown, rejected, not below what runs): refused, as a merge
// of an unknown module is, since nothing was tried. Anything else that
// stopped the step halts the plan, as a failed build does.
func (p *plan) targetRefused(ctx workflow.Context, err error, what string) error {
	var appErr *temporal.ApplicationError
	if ctx.Err() == nil && !p.aborted && errors.As(err, &appErr) && appErr.NonRetryable() {
		return endAs(meshapi.PlanRefused, what+" refused: "+errorReason(err))
	}
	return p.interrupted(ctx, err, what+" failed: ")
}

// setCommit records the commit a rollback or sync resolved, in its state
// and its MeshrollCommit search attribute (a merge has it from the start),
// so that plan list and the Web UI name the build it pushes.
func (p *plan) setCommit(ctx workflow.Context, commit string) {
	p.st.Commit = commit
	if err := workflow.UpsertTypedSearchAttributes(ctx, meshapi.SACommit.ValueSet(commit)); err != nil {
		workflow.GetLogger(ctx).Warn("could not set the commit search attribute", "error", err)
	}
}

// narrow keeps, of the plan's targets and tiers, only machines (a
// rollback's or a sync's reach), dropping tiers left empty.
func (p *plan) narrow(targets []meshapi.Target, machines []string) []meshapi.Target {
	keep := setOf(machines)
	var kept []meshapi.Target
	for _, t := range targets {
		if keep[t.Machine] {
			kept = append(kept, t)
		}
	}
	tiers := p.st.Tiers[:0]
	for _, tier := range p.st.Tiers {
		tier.Machines = slices.DeleteFunc(tier.Machines, func(m meshapi.MachineProgress) bool {
			return !keep[m.Machine]
		})
		if len(tier.Machines) > 0 {
			tiers = append(tiers, tier)
		}
	}
	p.st.Tiers = tiers
	return kept
}

// setOf is a set of names, for lookups that must not walk a fleet-sized
// list once per machine. Only looked up, never iterated, so its order does
// not reach the workflow's commands.
func setOf(names []string) map[string]bool {
	s := make(map[string]bool, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

// rollbackOptions are the RollbackTarget and SyncTarget activities':
// hosts and catalogue briefly away are retried within the push policy's
// budget.
func rollbackOptions(ctx workflow.Context, p meshapi.PushPolicy, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: p.RetryBudget,
		RetryPolicy:            retryForever,
		Summary:                summary,
	})
}
