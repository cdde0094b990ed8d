package plans

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// summaryClient is a running plan that answers the summary query as a
// plan of this build does, or, when old, as one of a build before it,
// which knows only the state query.
type summaryClient struct {
	planClient
	old     bool
	queries []string
}

func (s *summaryClient) QueryWorkflow(_ context.Context, _, _, name string, _ ...any) (converter.EncodedValue, error) {
	s.queries = append(s.queries, name)
	st := s.cur().st
	switch {
	case name == meshapi.QueryState:
		return stateValue(st), nil
	case s.old:
		return nil, serviceerror.NewQueryFailed(fmt.Sprintf("unknown queryType %s. KnownQueryTypes=[%s]", name, meshapi.QueryState))
	}
	return stateValue(st.Summarised()), nil
}

// Following a plan reads its summary: a tier of thousands as its counts
// and the few machines to look at. A plan whose build has no summary query
// is read whole and summarised here, so the two read the same.
func TestProgressReadsASummary(t *testing.T) {
	st := meshapi.PlanState{Plan: "plan/host/x", State: meshapi.PlanPushing, Tiers: []meshapi.TierState{
		{Tier: 1, State: meshapi.TierConverged, Machines: []meshapi.MachineProgress{{Machine: "edge-1", State: meshapi.MachineConverged}}},
		{Tier: 2, State: meshapi.TierPushing},
	}}
	for i := range 300 {
		m := meshapi.MachineProgress{Machine: fmt.Sprintf("edge-%03d", i), State: meshapi.MachinePushing}
		if i%50 == 7 {
			m.State = meshapi.MachineFailed
		}
		st.Tiers[1].Machines = append(st.Tiers[1].Machines, m)
	}
	for _, tc := range []struct {
		name    string
		old     bool
		queries []string
	}{
		{"a plan with the summary query", false, []string{meshapi.QuerySummary}},
		{"a plan from a build before it", true, []string{meshapi.QuerySummary, meshapi.QueryState}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &summaryClient{planClient: planClient{steps: []step{{st: st}}}, old: tc.old}
			got, err := Progress(context.Background(), c, st.Plan)
			require.NoError(t, err)
			assert.Equal(t, tc.queries, c.queries)
			assert.Equal(t, 1, c.reads, "one look at the plan's status, however many queries")
			assert.Equal(t, st.Tiers[0], got.Tiers[0], "a small tier whole")
			tier := got.Tiers[1]
			require.NotNil(t, tier.Summary)
			assert.Equal(t, "300 machines: 6 failed, 294 pushing", tier.CountWords())
			named, more := tier.ToLookAt(meshapi.SummaryNames)
			assert.Equal(t, []string{"edge-007=failed", "edge-057=failed", "edge-107=failed", "edge-157=failed", "edge-207=failed"}, named)
			assert.Equal(t, 1, more)
			assert.Len(t, tier.Machines, meshapi.SummaryNames, "no row for every machine")
		})
	}
}

// A query the plan refused for another reason is no sign of an older
// build: it is not asked again as the state query.
func TestProgressAsksTheStateQueryOnlyOfAnOlderBuild(t *testing.T) {
	assert.True(t, unknownQuery(fmt.Errorf("query plan p: %w", serviceerror.NewQueryFailed("unknown queryType summary. KnownQueryTypes=[state]"))))
	assert.False(t, unknownQuery(serviceerror.NewQueryFailed("workflow task failed: panic")))
	assert.False(t, unknownQuery(serviceerror.NewNotFound("unknown queryType")))
}
