// Package hist reads workflow histories for the benchmark: every event of
// a workflow, the billable actions they amount to, and the times at which
// things happened, so that the bench's figures come from what the server
// recorded rather than from the client's clock alone.
package hist

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Events is the whole history of the workflow's latest run.
func Events(ctx context.Context, c client.Client, id string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Keep writes a workflow's history into dir as <id>.json (slashes in the
// ID become underscores), in the JSON `temporal workflow show -o json`
// prints, so that a run's plans can be read after its server is gone.
func Keep(dir, id string, events []*historypb.HistoryEvent) error {
	b, err := protojson.MarshalOptions{Indent: " "}.Marshal(&historypb.History{Events: events})
	if err != nil {
		return fmt.Errorf("keep the history of %s: %w", id, err)
	}
	if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(id, "/", "_")+".json"), b, 0o644); err != nil {
		return fmt.Errorf("keep the history of %s: %w", id, err)
	}
	return nil
}

// Actions counts the billable actions in a history by Temporal Cloud's
// published rules, as far as a history shows them: a workflow started (or
// continued as new), each signal received, each activity attempt, each
// timer, each search attribute upsert, each signal or child workflow sent,
// each update accepted, and each local activity (a marker; the cloud
// counts local activities in one workflow task as one, so this is an upper
// bound). Queries leave no event and are not counted.
func Actions(events []*historypb.HistoryEvent) int {
	n := 0
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			enumspb.EVENT_TYPE_TIMER_STARTED,
			enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
			enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enumspb.EVENT_TYPE_MARKER_RECORDED:
			n++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// One per attempt: retries are billed too.
			n += max(1, int(e.GetActivityTaskStartedEventAttributes().GetAttempt()))
		}
	}
	return n
}

// Tasks counts the work a history made the server hand out or take in:
// each workflow task and each activity task started (an eagerly
// dispatched activity too: it is a task, only one that skipped the poll),
// each signal received and each update accepted. It is the engine's cost
// of a history, where Actions is the bill.
func Tasks(events []*historypb.HistoryEvent) int {
	n := 0
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			n++
		}
	}
	return n
}

// StickyTimeouts counts the workflow tasks that waited on a worker's
// sticky queue past its StickyScheduleToStartTimeout: the server then
// schedules the task again on the task queue, where it comes with the
// whole history, and the worker that takes it drops the workflow's cached
// state and replays. Each one costs two events, a timer and a transfer
// task on the server, and a replay on the worker.
func StickyTimeouts(events []*historypb.HistoryEvent) int {
	n := 0
	for _, e := range events {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT &&
			e.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			n++
		}
	}
	return n
}

// Bytes is a history's size as the server counts it against its limit
// of 50 MB: its events, encoded.
func Bytes(events []*historypb.HistoryEvent) int {
	n := 0
	for _, e := range events {
		n += proto.Size(e)
	}
	return n
}

// Span is the time from the first to the last event matching pick.
func Span(events []*historypb.HistoryEvent, pick func(*historypb.HistoryEvent) bool) (first, last time.Time, ok bool) {
	for _, e := range events {
		if !pick(e) {
			continue
		}
		t := e.GetEventTime().AsTime()
		if !ok || t.Before(first) {
			first = t
		}
		if !ok || t.After(last) {
			last = t
		}
		ok = true
	}
	return first, last, ok
}

// Is picks events of one type.
func Is(t enumspb.EventType) func(*historypb.HistoryEvent) bool {
	return func(e *historypb.HistoryEvent) bool { return e.GetEventType() == t }
}

// ActivityScheduled picks the scheduling of activities of one type.
func ActivityScheduled(activityType string) func(*historypb.HistoryEvent) bool {
	return func(e *historypb.HistoryEvent) bool {
		return e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
			e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activityType
	}
}

// LocalActivityType is the activity type of a local activity's marker, or
// "" for any other event. The SDK records it in the marker's "data"
// details as JSON.
func LocalActivityType(e *historypb.HistoryEvent) string {
	a := e.GetMarkerRecordedEventAttributes()
	if a == nil || a.GetMarkerName() != "LocalActivity" {
		return ""
	}
	ps := a.GetDetails()["data"].GetPayloads()
	if len(ps) == 0 {
		return ""
	}
	var d struct{ ActivityType string }
	if err := json.Unmarshal(ps[0].GetData(), &d); err != nil {
		return ""
	}
	return d.ActivityType
}

// Duration is the time from the workflow's start to its close, by the
// server's clock.
func Duration(events []*historypb.HistoryEvent) time.Duration {
	if len(events) == 0 {
		return 0
	}
	return events[len(events)-1].GetEventTime().AsTime().Sub(events[0].GetEventTime().AsTime())
}
