package hist

import (
	"testing"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

func timedOut(t enumspb.TimeoutType) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
		Attributes: &historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes{
			WorkflowTaskTimedOutEventAttributes: &historypb.WorkflowTaskTimedOutEventAttributes{TimeoutType: t},
		},
	}
}

// Only a task that waited out a sticky queue (schedule-to-start) counts: a
// task a worker started and did not finish in time (start-to-close) is
// another fault.
func TestStickyTimeoutsCountsScheduleToStartOnly(t *testing.T) {
	scheduled := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED}
	for _, tc := range []struct {
		name   string
		events []*historypb.HistoryEvent
		want   int
	}{
		{"none", []*historypb.HistoryEvent{scheduled}, 0},
		{"one sticky timeout", []*historypb.HistoryEvent{scheduled, timedOut(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START), scheduled}, 1},
		{"a start-to-close timeout", []*historypb.HistoryEvent{scheduled, timedOut(enumspb.TIMEOUT_TYPE_START_TO_CLOSE)}, 0},
		{"two", []*historypb.HistoryEvent{timedOut(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START), scheduled, timedOut(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, StickyTimeouts(tc.events))
		})
	}
}
