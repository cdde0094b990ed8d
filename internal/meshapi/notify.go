package meshapi

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Notification events: what a plan tells the notify targets that ask for
// it (config notify.targets.<name>.events). The names are stable, part of
// the webhook body and of the config.
const (
	EventPlanStarted          = "plan_started"
	EventPlanGated            = "plan_gated"
	EventPlanHeld             = "plan_held"
	EventAnalysisInconclusive = "analysis_inconclusive"
	EventPlanHalted           = "plan_halted"
	EventPlanRefused          = "plan_refused"
	EventPlanAborted          = "plan_aborted"
	EventPlanConverged        = "plan_converged"
	EventPlanRolledBack       = "plan_rolled_back"
	// EventBuildRejected is a build's rejection (starter build reject, a
	// rollback, a put-back after failed analysis), sent by whichever
	// recorded it first, under the ID of the plan that built it, with
	// sequence 0.
	EventBuildRejected = "build_rejected"
)

// NotifyEvents are every event a plan sends, in the order a plan may send
// them, so that the config can name the valid ones.
var NotifyEvents = []string{
	EventPlanStarted, EventPlanGated, EventPlanHeld, EventAnalysisInconclusive,
	EventPlanHalted, EventPlanRefused, EventPlanAborted, EventPlanConverged, EventPlanRolledBack,
	EventBuildRejected,
}

// KnownEvent says whether name is one of NotifyEvents.
func KnownEvent(name string) bool { return slices.Contains(NotifyEvents, name) }

// NotifierWorkflowType delivers one plan's events to one notify target,
// in order (workflows.Notifier).
const NotifierWorkflowType = "Notifier"

// SignalNotify carries a NotifyEvent to a Notifier workflow.
const SignalNotify = "notify"

// SignalNotifyTrouble carries a NotifyTrouble from a Notifier to its plan,
// so that a running plan's details and state show a target that keeps
// failing.
const SignalNotifyTrouble = "notify-trouble"

// How a Notifier's trouble with a target stands (NotifyTrouble.Outcome).
const (
	// NotifyFailing: a delivery failed and is tried again.
	NotifyFailing = "failing"
	// NotifyAbandoned: the Notifier gave up on an event (give_up_after
	// passed, or the target left the config).
	NotifyAbandoned = "abandoned"
	// NotifyRecovered: an event that had failed was delivered.
	NotifyRecovered = "recovered"
)

// NotifyTrouble is a Notifier's word to its plan when delivering to a
// target goes wrong or right again: sent on an event's first failure, when
// it is abandoned and when it is delivered after failing, never once per
// try, so that a target down for a day costs the plan a few events.
type NotifyTrouble struct {
	Target string `json:"target"`
	// Event is the event's key (NotifyEvent.Key).
	Event   string `json:"event"`
	Outcome string `json:"outcome"`
	// Since is when the event first failed.
	Since time.Time `json:"since"`
	// Error is the last failure's reason.
	Error string `json:"error,omitempty"`
}

// Words say it for a person, in one line short enough for the Web UI's
// details: "notify target team failing since 10:04:05 UTC: post event
// plan/h/c#1-plan_started: receiver answered 503 …". The event is named
// in brackets only when the error does not name it already.
func (t NotifyTrouble) Words() string {
	event := ""
	if !strings.Contains(t.Error, t.Event) {
		event = " (" + t.Event + ")"
	}
	return fmt.Sprintf("notify target %s %s since %s UTC%s: %s", t.Target, t.Outcome, t.Since.UTC().Format("15:04:05"), event, t.Error)
}

const notifierPrefix = "notify/"

// NotifierID is the Notifier workflow of a plan's events to a target: one
// per plan and target, so that a target that is down delays only its own
// deliveries, and a plan's events reach each target in the order they
// happened.
func NotifierID(target, plan string) string { return notifierPrefix + target + "/" + plan }

// NotifyEvent is one event of a plan, in the plan's own words.
type NotifyEvent struct {
	// Event is one of NotifyEvents.
	Event string `json:"event"`
	// Sequence counts the plan's events from 1: with the plan and the
	// event it makes the idempotency key (Key).
	Sequence int        `json:"sequence"`
	Plan     string     `json:"plan"`
	Module   string     `json:"module"`
	Commit   string     `json:"commit"`
	State    PlanStatus `json:"state"`
	// Reason is the plan's words at the event: its current details'
	// first line, or its ending's reason.
	Reason string `json:"reason,omitempty"`
	// Command is what a person runs to move the plan on (approve,
	// resume), when the event waits for one.
	Command string `json:"command,omitempty"`
}

// Key is the event's idempotency key: the same for every delivery attempt
// of it to any target, so that a receiver drops a repeat.
func (e NotifyEvent) Key() string { return fmt.Sprintf("%s#%d-%s", e.Plan, e.Sequence, e.Event) }

// NotifyInput asks the Notify local activity to hand an event to the
// Notifier workflow of every target that wants it.
type NotifyInput struct {
	Event NotifyEvent `json:"event"`
}

// NotifyResult names the targets the event was handed to.
type NotifyResult struct {
	Targets []string `json:"targets,omitempty"`
}

// NotifierInput starts a Notifier: the target and the plan it delivers,
// and how it tries a delivery that fails (the target's config when the
// Notifier started).
type NotifierInput struct {
	Target string      `json:"target"`
	Plan   string      `json:"plan"`
	Retry  NotifyRetry `json:"retry,omitzero"`
}

// NotifyRetry is how a Notifier tries a delivery again: after First, then
// twice as long each time up to Max, until GiveUp has passed since the
// first try. A zero field is its default (WithDefaults).
type NotifyRetry struct {
	First  time.Duration `json:"first,omitempty"`
	Max    time.Duration `json:"max,omitempty"`
	GiveUp time.Duration `json:"give_up,omitempty"`
}

// Default retry of a notification: 1 s, doubling up to 10 min, for a day.
const (
	DefaultNotifyFirst  = time.Second
	DefaultNotifyMax    = 10 * time.Minute
	DefaultNotifyGiveUp = 24 * time.Hour
)

// WithDefaults fills the fields left zero.
func (r NotifyRetry) WithDefaults() NotifyRetry {
	return NotifyRetry{First: cmp.Or(r.First, DefaultNotifyFirst), Max: cmp.Or(r.Max, DefaultNotifyMax), GiveUp: cmp.Or(r.GiveUp, DefaultNotifyGiveUp)}
}

// DeliverInput is one delivery attempt of an event to a target.
type DeliverInput struct {
	Target string      `json:"target"`
	Event  NotifyEvent `json:"event"`
	// Attempt counts the Notifier's attempts at this event, from 1.
	Attempt int `json:"attempt"`
}

// WebUILink is a workflow's page in the Temporal Web UI at base, or ""
// without a base: where the fleet page and notifications link a plan.
func WebUILink(base, namespace, id string) string {
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/namespaces/" + url.PathEscape(namespace) + "/workflows/" + url.PathEscape(id)
}

// ApproveCommand is what a person runs to open a plan's gate before tier,
// or, with a tier below 0, to pass its inconclusive analysis, as the
// starter takes it: the fleet page and notifications show it.
func ApproveCommand(plan string, tier int) string {
	if tier < 0 {
		return "starter plan approve " + plan
	}
	return fmt.Sprintf("starter plan approve %s --tier %d", plan, tier)
}
