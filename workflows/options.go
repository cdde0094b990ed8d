package workflows

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/activities"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// acts names activities through a nil pointer; only the method names matter.
var acts *activities.Activities

// retryForever is the retry policy of activities whose transient failures
// (a worker restart, Temporal briefly away) should be outlasted; their
// schedule-to-close timeout is the budget.
var retryForever = &temporal.RetryPolicy{
	InitialInterval:    time.Second,
	BackoffCoefficient: 2,
	MaximumInterval:    30 * time.Second,
}

func targetsOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
}

// buildOptions are the build's; composing, with a build that composes too
// (BuildAndCompose), names how many machines in its summary.
func buildOptions(ctx workflow.Context, module, commit string, composing int) workflow.Context {
	summary := fmt.Sprintf("build %s at %s", module, mesh.ShortCommit(commit))
	if composing > 0 {
		summary += fmt.Sprintf(" and compose %d machines", composing)
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Minute,
		HeartbeatTimeout:       time.Minute,
		ScheduleToCloseTimeout: 2 * time.Hour,
		// A build that keeps failing on something transient (an unreachable
		// registry) halts the plan after about a quarter of a minute of
		// retries, naming what it tried; a compile error halts at once.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 4},
		Summary:     summary,
	})
}

func composeOptions(ctx workflow.Context, p meshapi.PushPolicy, machines int) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    5 * time.Minute,
		HeartbeatTimeout:       time.Minute,
		ScheduleToCloseTimeout: p.RetryBudget,
		RetryPolicy:            retryForever,
		Summary:                fmt.Sprintf("compose %d machines", machines),
	})
}

func handOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy:            retryForever,
	})
}

// handActivityOptions are a HandPushes activity's, as the local one's: a
// frontend briefly away is outlasted; its summary names the machines it
// hands pushes to.
func handActivityOptions(ctx workflow.Context, reqs []meshapi.PushRequest) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy:            retryForever,
		Summary:                "hand pushes to " + machinesOf(reqs),
	})
}

// machinesOf names the machines of requests for a summary in the Web UI:
// "1 machine, edge-1", or "120 machines, edge-000 to edge-119".
func machinesOf(reqs []meshapi.PushRequest) string {
	if len(reqs) == 1 {
		return "1 machine, " + reqs[0].Machine
	}
	return fmt.Sprintf("%d machines, %s to %s", len(reqs), reqs[0].Machine, reqs[len(reqs)-1].Machine)
}

// relayOptions are a relay's: a child of its plan, ended with it, on the
// relays' own task queue beside the plan's, named in the Web UI by the
// machines it hears.
func relayOptions(ctx workflow.Context, id string, reqs []meshapi.PushRequest) workflow.Context {
	return workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        id,
		TaskQueue:         meshapi.RelayTaskQueue(workflow.GetInfo(ctx).TaskQueueName),
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		StaticSummary:     "relay the answers of " + machinesOf(reqs),
	})
}

func pushOptions(ctx workflow.Context, p meshapi.PushPolicy, summary string) workflow.Context {
	attempt := pushAttempt(p)
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    attempt,
		HeartbeatTimeout:       20 * time.Second,
		ScheduleToCloseTimeout: p.RetryBudget + attempt,
		RetryPolicy:            retryForever,
		Summary:                summary,
	})
}

// localPushOptions are pushOptions for a push run as a local activity
// (PushRequest.Local): the same attempt and budget, retried the same
// way. It has no heartbeat timeout (a local activity's heartbeat does
// nothing): a worker that dies mid-push is found by the workflow task's
// timeout, and the push is run again by the worker that takes the task.
func localPushOptions(ctx workflow.Context, p meshapi.PushPolicy, summary string) workflow.Context {
	attempt := pushAttempt(p)
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    attempt,
		ScheduleToCloseTimeout: p.RetryBudget + attempt,
		RetryPolicy:            retryForever,
		Summary:                summary,
	})
}

// pushAttempt is how long one attempt of a push may take: the wait for the
// host to report the declaration running, and a minute for the rest.
func pushAttempt(p meshapi.PushPolicy) time.Duration { return p.RunningTimeout + time.Minute }

// bakeOptions lets a bake run its length and then some; a worker that dies
// mid-bake is outlasted, and the retry goes on with the time left (the
// activity times the bake from when it was scheduled).
func bakeOptions(ctx workflow.Context, p meshapi.PushPolicy, bake time.Duration, tier int) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    bake + time.Minute,
		HeartbeatTimeout:       20 * time.Second,
		ScheduleToCloseTimeout: bake + p.RetryBudget + time.Minute,
		RetryPolicy:            retryForever,
		Summary:                fmt.Sprintf("bake tier %d for %s", tier, bake),
	})
}
