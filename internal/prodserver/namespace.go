package prodserver

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/temporalcli"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// NamespaceTimeout bounds RegisterNamespace: the script, the check and the
// wait for the frontend to accept meshroll's search attributes.
const NamespaceTimeout = 3 * time.Minute

// RegisterNamespace runs deploy/temporal/create-namespace.sh with the
// Temporal CLI (temporalcli.Path; its error wraps temporalcli.ErrNotFound
// when there is none), the operator's one-time set-up of a new cluster
// (the compose file's temporal-namespace job); checks that the namespace
// then has exactly meshapi.SearchAttributeTypes; and waits until the
// frontend starts a workflow with all of them, as a plan does: it sees new
// attributes once its namespace cache refreshes, and until then a merge
// could be refused.
func (s *Server) RegisterNamespace(ctx context.Context, namespace string) error {
	cli, err := temporalcli.Path()
	if err != nil {
		return fmt.Errorf("register namespace %s with deploy/temporal/create-namespace.sh: %w", namespace, err)
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(ctx, NamespaceTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(s.root, "deploy", "temporal", "create-namespace.sh"))
	cmd.Env = append(baseEnv(), "TEMPORAL_CLI="+cli, "TEMPORAL_ADDRESS="+s.frontend, "TEMPORAL_NAMESPACE="+namespace)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("deploy/temporal/create-namespace.sh (namespace %s on %s): %w:\n%s", namespace, s.frontend, err, Tail(string(out), 40))
	}

	c, err := temporalx.Dial(ctx, config.Temporal{Address: s.frontend, Namespace: namespace}, zerolog.Nop(), 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	want, err := wantSearchAttributes()
	if err != nil {
		return err
	}
	got, err := searchAttributes(ctx, c, namespace)
	if err != nil {
		return err
	}
	if !maps.Equal(want, got) {
		return fmt.Errorf("namespace %s has meshroll search attributes %v after deploy/temporal/create-namespace.sh, want meshapi.SearchAttributeTypes %v: make the script's list the code's", namespace, got, want)
	}

	probe := temporal.NewSearchAttributes(
		meshapi.SAModule.ValueSet("probe"), meshapi.SACommit.ValueSet("probe"), meshapi.SAMachines.ValueSet([]string{"probe"}),
		meshapi.SAState.ValueSet("probe"), meshapi.SAMachine.ValueSet("probe"))
	var lastErr error
	for ctx.Err() == nil {
		var run client.WorkflowRun
		run, lastErr = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: "prodserver-search-attribute-probe", TaskQueue: "prodserver-search-attribute-probe", TypedSearchAttributes: probe,
		}, "SearchAttributeProbe")
		if lastErr == nil {
			if err := c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "search attribute probe"); err != nil {
				return fmt.Errorf("terminate the search attribute probe on namespace %s: %w", namespace, err)
			}
			s.logf("namespace %s registered with meshroll's search attributes in %v", namespace, time.Since(started).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("namespace %s does not start a workflow with meshroll's search attributes within %v: %w", namespace, NamespaceTimeout, lastErr)
}

// wantSearchAttributes is meshapi.SearchAttributeTypes as the server names
// the types (enumspb.IndexedValueType's String), to compare with
// searchAttributes.
func wantSearchAttributes() (map[string]string, error) {
	want := map[string]string{}
	for name, typ := range meshapi.SearchAttributeTypes {
		v, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			return nil, fmt.Errorf("meshapi.SearchAttributeTypes: %s: %w", name, err)
		}
		want[name] = v.String()
	}
	return want, nil
}

// searchAttributes are the namespace's custom search attributes named
// Meshroll*, with their types, as the server lists them.
func searchAttributes(ctx context.Context, c client.Client, namespace string) (map[string]string, error) {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list the search attributes of namespace %s: %w", namespace, err)
	}
	got := map[string]string{}
	for name, typ := range have.GetCustomAttributes() {
		if strings.HasPrefix(name, "Meshroll") {
			got[name] = typ.String()
		}
	}
	return got, nil
}
