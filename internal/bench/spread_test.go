package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// holderHistory is a Holder's history with its first request at s1 and
// its second at s2 (seconds), each taking two seconds to end.
func holderHistory(t0 time.Time, s1, s2 int) []*historypb.HistoryEvent {
	ev := func(s int, typ enumspb.EventType) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventType: typ, EventTime: timestamppb.New(t0.Add(time.Duration(s) * time.Second))}
	}
	round := func(s int) []*historypb.HistoryEvent {
		return []*historypb.HistoryEvent{
			ev(s, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
			ev(s, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
			ev(s, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
			ev(s, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
			ev(s+1, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
			ev(s+1, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED),
			ev(s+1, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
			ev(s+2, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
			ev(s+2, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
			ev(s+2, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
		}
	}
	h := []*historypb.HistoryEvent{ev(s1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)}
	h = append(h, round(s1)...)
	h = append(h, round(s2)...)
	return append(h, ev(s2+2, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED))
}

// Each round is read from its own events across every workflow: its tasks
// (a signal, two workflow tasks and an activity a workflow) over the time
// from its first event anywhere to its last.
func TestSpreadPhasesSplitsAtTheSecondRequest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	first, next, err := spreadPhases([][]*historypb.HistoryEvent{
		holderHistory(t0, 0, 10),
		holderHistory(t0, 3, 14),
	})
	require.NoError(t, err)
	assert.Equal(t, 8, first.tasks)
	assert.Equal(t, 5*time.Second, first.last.Sub(first.start), "first round: 0 s to 5 s")
	assert.Equal(t, 8, next.tasks)
	assert.Equal(t, 6*time.Second, next.last.Sub(next.start), "next round: 10 s to 16 s")
	assert.InDelta(t, 8.0/6, next.rate(), 1e-9)
}

func TestSpreadPhasesRefusesAHistoryWithOneRequest(t *testing.T) {
	h := holderHistory(time.Unix(1000, 0), 0, 10)
	_, _, err := spreadPhases([][]*historypb.HistoryEvent{h[:8]})
	require.ErrorContains(t, err, "no second request")
}
