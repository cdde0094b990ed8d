package activities

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/notify"
)

// ErrTargetGone is the error type of a delivery to a notify target the
// worker's config no longer has: nothing can deliver it.
const ErrTargetGone = "NotifyTargetGone"

// notifyTimeout bounds one delivery attempt: a receiver that takes longer
// is tried again later.
const notifyTimeout = 15 * time.Second

// notifyClient posts notifications. Its timeout is the attempt's.
var notifyClient = &http.Client{Timeout: notifyTimeout}

// notifies says whether some notify target could want events of a plan of
// module, so that a plan of a mesh without notifications asks nothing.
func (a *Activities) notifies(module string) bool {
	for _, t := range a.Mesh.Current().Notify.Targets {
		if len(t.Modules) == 0 || slices.Contains(t.Modules, module) {
			return true
		}
	}
	return false
}

// Notify hands a plan's event to the Notifier workflow of every target
// that wants it, by signal-with-start (one Notifier per plan and target).
// The plan runs it as a local activity: it only signals, so it is quick,
// and the delivery itself, with its retries, happens in the Notifier,
// never in the plan.
func (a *Activities) Notify(ctx context.Context, in meshapi.NotifyInput) (meshapi.NotifyResult, error) {
	cfg := a.Mesh.Current()
	queue := activity.GetInfo(ctx).TaskQueue
	var res meshapi.NotifyResult
	names := make([]string, 0, len(cfg.Notify.Targets))
	for name, t := range cfg.Notify.Targets {
		if t.Wants(in.Event.Event, in.Event.Module) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		id := meshapi.NotifierID(name, in.Event.Plan)
		_, err := a.Temporal.SignalWithStartWorkflow(ctx, id, meshapi.SignalNotify, in.Event,
			client.StartWorkflowOptions{
				ID:        id,
				TaskQueue: queue,
				// A Notifier ends when it has delivered all it was given;
				// the plan's next event starts it again.
				WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
				StaticSummary:         fmt.Sprintf("notify %s of %s", name, in.Event.Plan),
			},
			meshapi.NotifierWorkflowType, meshapi.NotifierInput{Target: name, Plan: in.Event.Plan, Retry: cfg.Notify.Targets[name].Retry()})
		if err != nil {
			return res, fmt.Errorf("hand event %s to notify target %s: %w", in.Event.Key(), name, err)
		}
		res.Targets = append(res.Targets, name)
	}
	return res, nil
}

// announceRejection hands a rejection of a build to the
// targets that want build_rejected, under the ID of the plan that built
// it (so that it reaches a target after that plan's own events). A
// rejection is recorded whether or not it is: a notification never fails
// the lever, and a failure to hand it over is logged.
func (a *Activities) announceRejection(ctx context.Context, r mesh.Rejection) {
	e := meshapi.NotifyEvent{
		Event: meshapi.EventBuildRejected, Plan: meshapi.PlanID(r.Module, r.Commit), Module: r.Module, Commit: r.Commit,
		Reason: r.String(),
	}
	if _, err := a.Notify(ctx, meshapi.NotifyInput{Event: e}); err != nil {
		a.Log.Warn().Err(err).Str("event", e.Key()).Msg("could not hand the rejection's notification over")
	}
}

// announceOwnRejection announces r when plan recorded it (a rollback, or
// a put-back after failed analysis, rejecting what it leaves): a build an
// operator or an earlier plan rejected was announced then.
func (a *Activities) announceOwnRejection(ctx context.Context, r mesh.Rejection, plan string) {
	if r.By == plan {
		a.announceRejection(ctx, r)
	}
}

// Deliver posts one event to one notify target, once: the Notifier
// workflow tries again, with backoff, while it fails. The target's URL
// and secret are read from the worker's config now, so that neither is in
// a history.
func (a *Activities) Deliver(ctx context.Context, in meshapi.DeliverInput) error {
	cfg := a.Mesh.Current()
	t, ok := cfg.Notify.Targets[in.Target]
	if !ok {
		return permanent(ErrTargetGone, "notify target %s is no longer in the worker's config", in.Target)
	}
	key, err := t.Key(in.Target)
	if err != nil {
		return err
	}
	links := notify.Links{
		WebUI: meshapi.WebUILink(cfg.Temporal.UIURL, activity.GetInfo(ctx).Namespace, in.Event.Plan),
		Fleet: cfg.Notify.FleetURL,
	}
	err = notify.Send(ctx, notifyClient, notify.Target{Kind: t.Kind, URL: t.URL, Key: key}, in.Event, links)
	if err != nil {
		a.Log.Warn().Err(err).Str("target", in.Target).Str("event", in.Event.Key()).Int("attempt", in.Attempt).Msg("notification not delivered; the Notifier tries again")
		return err
	}
	return nil
}
