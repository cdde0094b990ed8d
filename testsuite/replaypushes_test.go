package testsuite

import (
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
)

// pushOrder is a replay interceptor that holds the machine workflow to the
// order of the pushes its history recorded. The SDK's replay matches an
// activity command by type and ID, not by input, so code that pushes the
// queued requests in another order (every push is the same activity type)
// replays without a non-determinism error while it mixes up whose answer is
// whose; this check makes such a change fail TestReplayHistories.
type pushOrder struct {
	interceptor.WorkerInterceptorBase
	t *testing.T
	// want are the request IDs of the history's push activities, in order;
	// got those the code scheduled on replay.
	want, got []string
}

// newPushOrder reads the push activities a history scheduled.
func newPushOrder(t *testing.T, h *historypb.History) *pushOrder {
	p := &pushOrder{t: t}
	for _, e := range h.GetEvents() {
		if e.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			continue
		}
		a := e.GetActivityTaskScheduledEventAttributes()
		if a.GetActivityType().GetName() != "PushAndAnswer" {
			continue
		}
		var in meshapi.PushInput
		require.NoError(t, payloads.Converter.FromPayloads(a.GetInput(), &in))
		p.want = append(p.want, in.Request.Request)
	}
	return p
}

// check fails the test unless the code scheduled the history's pushes, in
// its order.
func (p *pushOrder) check() {
	p.t.Helper()
	require.Equal(p.t, p.want, p.got, "the push activities replayed, in order (request IDs)")
}

func (p *pushOrder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &pushOrderInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, p: p}
}

type pushOrderInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	p *pushOrder
}

func (i *pushOrderInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&pushOrderOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, p: i.p})
}

type pushOrderOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	p *pushOrder
}

func (o *pushOrderOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if activityType == "PushAndAnswer" && len(args) == 1 {
		if in, ok := args[0].(meshapi.PushInput); ok {
			o.p.got = append(o.p.got, in.Request.Request)
		}
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}
