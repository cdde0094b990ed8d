package devserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/temporalcli"
)

func echoWorkflow(_ workflow.Context, s string) (string, error) {
	return "echo: " + s, nil
}

// waitForSignalWorkflow blocks until it receives "finish", then returns the
// signal's value.
func waitForSignalWorkflow(ctx workflow.Context) (string, error) {
	var v string
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, &v)
	return "finished: " + v, nil
}

func startWorker(t *testing.T, c client.Client, taskQueue string) {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(echoWorkflow, workflow.RegisterOptions{Name: "Echo"})
	w.RegisterWorkflowWithOptions(waitForSignalWorkflow, workflow.RegisterOptions{Name: "WaitForSignal"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

func TestRunsWorkflowToCompletion(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t, devserver.Options{SearchAttributes: []string{"MeshrollTestModule"}})
	c := srv.Client()
	require.NotNil(t, c)
	assert.NotEmpty(t, srv.HostPort())
	assert.Equal(t, "default", srv.Namespace())

	startWorker(t, c, "devserver-test")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "echo-1",
		TaskQueue: "devserver-test",
	}, "Echo", "hi")
	require.NoError(t, err)
	var got string
	require.NoError(t, run.Get(ctx, &got))
	assert.Equal(t, "echo: hi", got)

	// The search attribute passed in Options is registered.
	sas, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: srv.Namespace()})
	require.NoError(t, err)
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, sas.GetCustomAttributes()["MeshrollTestModule"])

	// Passing tests keep the log out of the output, but it is there.
	assert.Contains(t, srv.Log(), "server ready")
}

// TestNamespacesOfASharedServerAreApart runs the same workflow ID in two
// namespaces of one launched server: tests that share a server must not
// meet (a machine workflow's ID is its machine's name in every test).
func TestNamespacesOfASharedServerAreApart(t *testing.T) {
	t.Parallel()
	devserver.Require(t)
	srv, err := devserver.Launch(devserver.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names []string
	for _, who := range []string{"first", "second"} {
		ns, c := srv.NewNamespace(t, "")
		names = append(names, ns)
		startWorker(t, c, "shared")
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "same-id", TaskQueue: "shared"}, "Echo", who)
		require.NoError(t, err, "namespace %s", ns)
		var got string
		require.NoError(t, run.Get(ctx, &got))
		assert.Equal(t, "echo: "+who, got)
	}
	assert.NotEqual(t, names[0], names[1])
	for _, ns := range names {
		assert.True(t, strings.HasPrefix(ns, "t"), ns)
		assert.Contains(t, ns, "testnamespacesofasharedserverareapart")
	}
}

func TestRestartKeepsWorkflows(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "temporal.db")
	srv := devserver.Start(t, devserver.Options{DBFile: db, Namespace: "meshroll-test"})
	c := srv.Client()
	addr := srv.HostPort()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// No worker yet: the workflow is started and stays running.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "wait-1",
		TaskQueue: "devserver-restart-test",
	}, "WaitForSignal")
	require.NoError(t, err)

	srv.Restart(t)
	assert.Equal(t, addr, srv.HostPort(), "restart keeps the address")
	_, err = os.Stat(db)
	require.NoError(t, err, "the DB file exists")

	// The same client reconnects; the workflow survived the restart.
	require.Eventually(t, func() bool {
		d, err := c.DescribeWorkflow(ctx, "wait-1", run.GetRunID())
		return err == nil && d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, time.Minute, 200*time.Millisecond, "workflow wait-1 is not running after restart")

	// And it can be finished on the restarted server.
	startWorker(t, c, "devserver-restart-test")
	require.NoError(t, c.SignalWorkflow(ctx, "wait-1", run.GetRunID(), "finish", "after restart"))
	var got string
	require.NoError(t, run.Get(ctx, &got))
	assert.Equal(t, "finished: after restart", got)
}

func TestCLIPathFromEnv(t *testing.T) {
	t.Setenv(devserver.CLIEnv, filepath.Join(t.TempDir(), "no-such-temporal"))
	_, err := devserver.CLIPath()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "scripts/install-temporal.sh")
	assert.Contains(t, err.Error(), devserver.CLIEnv)

	// A CLI of the pinned version, as far as `--version` tells.
	fake := filepath.Join(t.TempDir(), "temporal")
	script := "#!/bin/sh\ntest \"$1\" = --version && echo \"temporal version " + strings.TrimPrefix(temporalcli.Version, "v") + " (Server 1.29.1, UI 2.42.1)\"\n"
	require.NoError(t, os.WriteFile(fake, []byte(script), 0o755))
	t.Setenv(devserver.CLIEnv, fake)
	p, err := devserver.CLIPath()
	require.NoError(t, err)
	assert.Equal(t, fake, p)
}

func TestCLIPathMissing(t *testing.T) {
	t.Setenv(devserver.CLIEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOBIN", "")
	t.Setenv("GOPATH", t.TempDir())
	_, err := devserver.CLIPath()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "scripts/install-temporal.sh")
	assert.Contains(t, err.Error(), "not found")
}
