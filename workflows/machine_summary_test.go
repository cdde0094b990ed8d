package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// Every summary a machine workflow publishes is at most
// meshapi.MachineChangedEvery newer than the change time it leaves in
// meshapi.SAMachineChanged, which is what a reader listing changes since
// its last look relies on (machinefeed.DefaultOverlap reaches back past
// it); a push shorter than that sets the change time once, not at its
// start and again at its end; and a workflow started with a change time
// (as the plan's hand-over starts it) does not set it again at once.
func TestMachineChangeTimeFollowsItsSummaries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
		// started says the workflow starts with a change time.
		started bool
		// everyOne says each memo upsert comes with a change time.
		everyOne bool
	}{
		{name: "pushes shorter than the change time's step", delay: time.Second},
		{name: "pushes longer than it", delay: 2 * meshapi.MachineChangedEvery, everyOne: true},
		{name: "started with a change time", delay: time.Second, started: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newMachineHarness(t)
			h.delay = tc.delay
			var startedAt []time.Time
			if tc.started {
				at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
				h.env.SetStartTime(at)
				require.NoError(t, h.env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(meshapi.SAMachineChanged.ValueSet(at))))
				startedAt = append(startedAt, at)
			}
			h.signalAt(0, req("plan/host/1", "host", 1))
			h.signalAt(time.Minute, req("plan/host/2", "host", 2))
			// wrong are change times other than the workflow's time.
			var memos, changes, wrong []time.Time
			h.env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
				if _, ok := args.Get(0).(map[string]any)[meshapi.MemoMachine]; ok {
					memos = append(memos, h.env.Now())
				}
			}).Return(nil)
			h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				sa, _ := args.Get(0).(temporal.SearchAttributes)
				if at, ok := sa.GetTime(meshapi.SAMachineChanged); ok {
					changes = append(changes, at)
					if !at.Equal(h.env.Now()) {
						wrong = append(wrong, at)
					}
				}
			}).Return(nil)
			h.run(meshapi.MachineInput{Machine: "m1", ContinueAfter: 2})

			require.Len(t, h.pushes, 2)
			require.Empty(t, wrong, "change times other than the workflow's time")
			require.NotEmpty(t, memos)
			for _, m := range memos {
				var last time.Time
				for _, c := range append(startedAt, changes...) {
					if !c.After(m) {
						last = c
					}
				}
				require.False(t, last.IsZero(), "a summary published at %s before any change time", m)
				require.LessOrEqual(t, m.Sub(last), meshapi.MachineChangedEvery, "summary published at %s, change time %s", m, last)
			}
			switch {
			case tc.started:
				require.NotEmpty(t, changes)
				require.True(t, changes[0].After(memos[0]), "the first summary (%s) set the change time again", memos[0])
			case tc.everyOne:
				require.Len(t, changes, len(memos))
			default:
				require.Less(t, len(changes), len(memos), "a short push sets the change time once")
			}
		})
	}
}
