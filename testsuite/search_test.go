package testsuite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// list runs a visibility query and returns the workflow IDs it finds.
func (s *stack) list(query string) []string {
	s.t.Helper()
	resp, err := s.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	require.NoError(s.t, err, "query %s", query)
	var ids []string
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids
}

// Plans are findable by module, commit, machine and state, and machine
// workflows by machine, through registered search attributes — what the Web
// UI's filters and `starter plan list` are built on.
func TestPlansFindableBySearchAttributes(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	id := s.converge("host", h1).Plan
	gated := s.startGated("host", s.commit("host"), 2)

	// Visibility is eventually consistent: wait for it, with a deadline.
	find := func(query string, want string) {
		t.Helper()
		require.Eventually(t, func() bool {
			for _, got := range s.list(query) {
				if got == want {
					return true
				}
			}
			return false
		}, 30*time.Second, 100*time.Millisecond, "query %q does not find %s", query, want)
	}
	find(fmt.Sprintf("MeshrollModule = 'host' AND MeshrollCommit = '%s'", h1), id)
	find("MeshrollMachines = 'control-node' AND MeshrollState = 'converged'", id)
	find("MeshrollState = 'gated'", gated)
	find("MeshrollMachine = 'edge-1'", meshapi.MachineID("edge-1"))
}
