package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// tierTimes reads one entry per hand-out (the batch after each Holds
// check) whichever way the plan handed out: a local HandPushes, regular
// HandPushes activities, relays with them, or a batch larger than
// push.hand_window handed over as answers made room (each of those
// several events, one hand-out).
func TestTierTimesOneEntryPerHandOut(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	ev := func(s int, typ enumspb.EventType) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventType: typ, EventTime: at(s)}
	}
	task := func(s int) *historypb.HistoryEvent { return ev(s, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED) }
	signal := func(s int) *historypb.HistoryEvent { return ev(s, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) }
	relay := func(s int) *historypb.HistoryEvent {
		return ev(s, enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
	}
	hand := func(s int) *historypb.HistoryEvent {
		e := ev(s, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: "HandPushes"}}}
		return e
	}
	handDone := func(s int) *historypb.HistoryEvent { return ev(s, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) }
	marker := func(s int, activity string) *historypb.HistoryEvent {
		e := ev(s, enumspb.EVENT_TYPE_MARKER_RECORDED)
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: "LocalActivity",
			Details:    map[string]*commonpb.Payloads{"data": {Payloads: []*commonpb.Payload{{Data: []byte(`{"ActivityType":"` + activity + `"}`)}}}},
		}}
		return e
	}
	local := func(s int) *historypb.HistoryEvent { return marker(s, "HandPushes") }
	holds := func(s int) *historypb.HistoryEvent { return marker(s, "Holds") }
	for _, tc := range []struct {
		name   string
		events []*historypb.HistoryEvent
		want   []time.Duration
	}{
		{"local hand-outs", []*historypb.HistoryEvent{
			task(0), holds(1), local(1), signal(3), task(3), holds(4), local(4), signal(9), ev(10, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED),
		}, []time.Duration{3 * time.Second, 6 * time.Second}},
		{"regular hand-outs, several activities each", []*historypb.HistoryEvent{
			task(0), holds(1), hand(1), hand(1), hand(1), handDone(2), handDone(2), signal(5), signal(7),
			task(7), holds(8), hand(8), hand(8), handDone(9), signal(12),
		}, []time.Duration{6 * time.Second, 4 * time.Second}},
		{"relays and hand activities", []*historypb.HistoryEvent{
			task(0), holds(1), relay(1), relay(1), hand(1), hand(1), task(2), handDone(2), signal(20), ev(21, enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED),
			task(22), holds(23), relay(23), hand(23), signal(30),
		}, []time.Duration{20 * time.Second, 7 * time.Second}},
		{"a batch handed over as answers make room", []*historypb.HistoryEvent{
			task(0), holds(1), relay(1), hand(1), handDone(2), signal(4), task(4), hand(5), handDone(6), signal(8),
			task(8), local(9), signal(11),
			task(12), holds(13), hand(13), signal(15),
		}, []time.Duration{10 * time.Second, 2 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tierTimes(tc.events))
		})
	}
}
