package workflows

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// Names of meshroll's own metrics. Workflows emit them through
// workflow.GetMetricsHandler, which skips replay, so a metric counts what
// happened once however often a history is replayed, and emitting one adds
// no command. Prometheus shows counters with a _total suffix and timers
// with _seconds (see package telemetry).
const (
	// MetricPlansStarted counts plans that began to run, by module.
	MetricPlansStarted = "meshroll_plans_started"
	// MetricPlansEnded counts plans that ended, by module and terminal state.
	MetricPlansEnded = "meshroll_plans_ended"
	// MetricTierDuration times a tier from handing its pushes over to its
	// last answer, by module, tier and how the tier ended.
	MetricTierDuration = "meshroll_tier_duration"
	// MetricPushes counts machine workflows' answers, by machine and outcome.
	MetricPushes = "meshroll_pushes"
	// MetricRefusals counts refused pushes by machine and reason: the stable
	// error type of the refusal (HostRefused, SequenceRefused, a guard code).
	MetricRefusals = "meshroll_push_refusals"
	// MetricQueueLength is the number of requests waiting on a machine
	// workflow, the one in flight not counted.
	MetricQueueLength = "meshroll_machine_queue_length"
	// MetricHostStateLost counts pushes that found their host had lost its
	// state (its last sequence below what its machine workflow sent), by
	// machine: a replaced disk or a re-imaged machine, pushed from the
	// fleet's record of its floor.
	MetricHostStateLost = "meshroll_host_state_lost"
	// MetricAnalyses counts analysis checks that ended, by module, tier,
	// check and verdict (passed, failed, inconclusive, cancelled).
	MetricAnalyses = "meshroll_analyses"
	// MetricNotifications counts delivery tries of plan events to notify
	// targets, by target, event and outcome (delivered, failed,
	// abandoned): a target that keeps failing shows as failed tries.
	MetricNotifications = "meshroll_notifications"
	// MetricFleetUnavailable is how many machines the fleet budget
	// (push.max_unavailable) counts unavailable now: the leases it holds
	// granted, by task queue.
	MetricFleetUnavailable = "meshroll_fleet_unavailable"
	// MetricFleetWaiting is how many machines wait in the fleet budget's
	// line for a lease, by task queue.
	MetricFleetWaiting = "meshroll_fleet_budget_waiting"
)

// MetricHelp is the help text of each of meshroll's workflow metrics, which
// the worker's telemetry attaches to them (the SDK's metrics handler carries
// none). A metric added above without a line here fails
// TestEveryMetricHasHelp.
var MetricHelp = map[string]string{
	MetricPlansStarted:     "Plans that began to run, by module.",
	MetricPlansEnded:       "Plans that ended, by module and terminal state (converged, halted, refused, ...).",
	MetricTierDuration:     "Time from handing a tier's pushes over to its last answer, by module, tier and how the tier ended.",
	MetricPushes:           "Answers of machine workflows to pushes, by machine and outcome.",
	MetricRefusals:         "Refused pushes, by machine and reason (the refusal's stable error type).",
	MetricQueueLength:      "Requests waiting on a machine workflow, the one in flight not counted.",
	MetricAnalyses:         "Analysis checks that ended, by module, tier, check and verdict (passed, failed, inconclusive, cancelled).",
	MetricNotifications:    "Delivery tries of plan events to notify targets, by target, event and outcome (delivered, failed, abandoned).",
	MetricHostStateLost:    "Pushes that found their host had lost its state (its last sequence below what was sent), by machine.",
	MetricFleetUnavailable: "Machines the fleet budget (push.max_unavailable) counts unavailable now: the leases it has granted, by task queue.",
	MetricFleetWaiting:     "Machines waiting in the fleet budget's line for a lease, by task queue.",
}

// budgetGauges sets the fleet budget's gauges: leases held and machines
// waiting.
func budgetGauges(ctx workflow.Context, leases, waiting int) {
	h := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"task_queue": workflow.GetInfo(ctx).TaskQueueName})
	h.Gauge(MetricFleetUnavailable).Update(float64(leases))
	h.Gauge(MetricFleetWaiting).Update(float64(waiting))
}

func planStarted(ctx workflow.Context, module string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"module": module}).Counter(MetricPlansStarted).Inc(1)
}

func planEnded(ctx workflow.Context, module string, state meshapi.PlanStatus) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"module": module, "state": string(state)}).Counter(MetricPlansEnded).Inc(1)
}

func tierTimed(ctx workflow.Context, module string, tier int, state meshapi.TierStatus, start time.Time) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"module": module, "tier": strconv.Itoa(tier), "state": string(state)}).
		Timer(MetricTierDuration).Record(workflow.Now(ctx).Sub(start))
}

func pushAnswered(ctx workflow.Context, machine string, outcome meshapi.MachineStatus) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"machine": machine, "outcome": string(outcome)}).Counter(MetricPushes).Inc(1)
}

func pushRefused(ctx workflow.Context, machine, reason string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"machine": machine, "reason": reason}).Counter(MetricRefusals).Inc(1)
}

func hostStateLost(ctx workflow.Context, machine string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"machine": machine}).Counter(MetricHostStateLost).Inc(1)
}

func queueLength(ctx workflow.Context, machine string, n int) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"machine": machine}).Gauge(MetricQueueLength).Update(float64(n))
}

func analysisEnded(ctx workflow.Context, module string, tier int, check string, verdict meshapi.Verdict) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"module": module, "tier": strconv.Itoa(tier), "check": check, "verdict": string(verdict)}).
		Counter(MetricAnalyses).Inc(1)
}
