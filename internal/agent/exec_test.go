//go:build unix

package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent/execrt/execrttest"
	"github.com/meshroll/meshroll/internal/mesh"
)

// execAgent is the real agent running the exec runtime, served over HTTP.
type execAgent struct {
	served
	updates chan Update
}

func openExecAgent(t *testing.T, dir string, reg *execrttest.Registry) *execAgent {
	t.Helper()
	rt, err := NewRuntime(RuntimeExec, RuntimeOptions{
		Machine: testMachine, StateDir: dir, Registry: reg.Options(), HealthyAfter: 100 * time.Millisecond, StopGrace: 5 * time.Second,
	})
	require.NoError(t, err)
	e := &execAgent{served: served{t: t}, updates: make(chan Update, 1024)}
	a, err := Open(context.Background(), Options{
		Machine: testMachine, StateDir: dir, Runtime: rt, Log: zerolog.Nop(),
		observed: func(u Update) { e.updates <- u },
	})
	require.NoError(t, err)
	e.serve(a, testToken)
	return e
}

// waitReported waits until the report, read over HTTP, shows module in
// state; every update the agent takes in is a reason to read it again.
func (e *execAgent) waitReported(module, state string) mesh.RunningContainer {
	e.t.Helper()
	timeout := time.NewTimer(waitLimit)
	defer timeout.Stop()
	for {
		rep, err := e.c.Report(context.Background())
		require.NoError(e.t, err)
		if rc, ok := rep.Running(module); ok && rc.State == state {
			return rc
		}
		select {
		case <-e.updates:
		case <-timeout.C:
			e.t.Fatalf("%s never reported %s: %+v", module, state, rep)
		}
	}
}

func TestAgentWithExecRuntime(t *testing.T) {
	reg := execrttest.NewRegistry(t)
	p := reg.Push(t, "meshroll/web", execrttest.AppImage(t, nil, "serve", "v1"))
	dir := t.TempDir()
	logPath := filepath.Join(dir, "logs", "web.log")
	readLog := func() string {
		b, err := os.ReadFile(logPath)
		require.NoError(t, err)
		return string(b)
	}

	e := openExecAgent(t, dir, reg)
	web := mesh.Container{Module: "web", Digest: p.Digest, Generation: 1, Image: p.Image, Env: map[string]string{"GREETING": "hello"}}
	_, err := e.c.Apply(context.Background(), decl(1, web))
	require.NoError(t, err)
	rc := e.waitReported("web", mesh.StateRunning)
	assert.Equal(t, p.Digest, rc.Digest)

	es, err := e.a.Journal(context.Background(), 0, MaxJournalLimit)
	require.NoError(t, err)
	assert.Equal(t, []string{OutcomeRunning + " 1", OutcomeApplied + " 1"}, outcomes(es))
	for _, en := range es {
		assert.Equal(t, RuntimeExec, en.Runtime)
	}
	requests := reg.Requests()
	e.close()
	log := readLog()
	assert.Contains(t, log, "testapp v1 mode serve")
	assert.Contains(t, log, "env GREETING=hello")
	assert.Contains(t, log, "testapp v1 got SIGTERM", "closing the agent stops the process")
	assert.Equal(t, 1, strings.Count(log, "meshroll exec: started pid"))

	// Reopened on the same state directory, the agent hands the declaration
	// to a new runtime, which starts the process again from the cache.
	e = openExecAgent(t, dir, reg)
	e.waitReported("web", mesh.StateRunning)
	assert.Equal(t, requests, reg.Requests(), "the image is not pulled again")
	assert.Equal(t, 2, strings.Count(readLog(), "meshroll exec: started pid"), "the process was restarted")
	es, err = e.a.Journal(context.Background(), 0, MaxJournalLimit)
	require.NoError(t, err)
	assert.Equal(t, []string{OutcomeRunning + " 1", OutcomeRunning + " 1", OutcomeApplied + " 1"}, outcomes(es))

	// Over HTTP, as the machine workflow reads it.
	code, page, body := e.getJournal("", testToken)
	require.Equal(t, 200, code, body)
	assert.Len(t, page.Entries, 3)
}
