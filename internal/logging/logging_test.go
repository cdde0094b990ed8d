package logging

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
)

func jsonLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(b)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		out = append(out, m)
	}
	require.NoError(t, sc.Err())
	return out
}

func TestTemporalAdapterWritesSnakeCaseJSON(t *testing.T) {
	var buf bytes.Buffer
	zl, err := New(&buf, "debug", "json")
	require.NoError(t, err)

	var l log.Logger = Temporal(zl)
	l.Info("Started Worker", "Namespace", "default", "TaskQueue", "meshroll", "WorkerID", "w1@host")
	l.Debug("debug line", "WorkflowID", "wf-1", "RunID", "run-1", "Attempt", 3)
	l.Warn("warn line", "Error", errors.New("boom"))
	l.Error("odd keyvals", "ActivityType", "Push", "dangling")

	wl, ok := l.(log.WithLogger)
	require.True(t, ok, "adapter must implement log.WithLogger")
	wl.With("WorkflowType", "Plan").Info("with line", "HTTPPort", 8080)

	lines := jsonLines(t, &buf)
	require.Len(t, lines, 5)

	assert.Equal(t, "info", lines[0]["level"])
	assert.Equal(t, "Started Worker", lines[0]["message"])
	assert.Equal(t, "default", lines[0]["namespace"])
	assert.Equal(t, "meshroll", lines[0]["task_queue"])
	assert.Equal(t, "w1@host", lines[0]["worker_id"])
	for _, k := range []string{"Namespace", "TaskQueue", "WorkerID"} {
		assert.NotContains(t, lines[0], k)
	}

	assert.Equal(t, "debug", lines[1]["level"])
	assert.Equal(t, "wf-1", lines[1]["workflow_id"])
	assert.Equal(t, "run-1", lines[1]["run_id"])
	assert.Equal(t, float64(3), lines[1]["attempt"])

	assert.Equal(t, "warn", lines[2]["level"])
	assert.Equal(t, "boom", lines[2]["error"])

	assert.Equal(t, "error", lines[3]["level"])
	assert.Equal(t, "Push", lines[3]["activity_type"])
	assert.Equal(t, "dangling", lines[3]["unpaired"])

	assert.Equal(t, "Plan", lines[4]["workflow_type"])
	assert.Equal(t, float64(8080), lines[4]["http_port"])

	for i, line := range lines {
		ts, ok := line["time"].(string)
		require.True(t, ok, "line %d has no time: %v", i, line)
		parsed, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), parsed, time.Minute)
		assert.True(t, strings.HasSuffix(ts, "Z"), "time %q is not UTC", ts)
		for k := range line {
			assert.Equal(t, SnakeCase(k), k, "key %q is not snake_case", k)
		}
	}
}

func TestTemporalAdapterRespectsLevel(t *testing.T) {
	var buf bytes.Buffer
	zl, err := New(&buf, "warn", "json")
	require.NoError(t, err)
	l := Temporal(zl)
	l.Debug("no")
	l.Info("no", "WorkflowID", "x")
	l.Warn("yes")
	lines := jsonLines(t, &buf)
	require.Len(t, lines, 1)
	assert.Equal(t, "yes", lines[0]["message"])
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"WorkflowID":   "workflow_id",
		"Namespace":    "namespace",
		"RunID":        "run_id",
		"TaskQueue":    "task_queue",
		"WorkerID":     "worker_id",
		"ActivityType": "activity_type",
		"HTTPPort":     "http_port",
		"WorkflowIDs":  "workflow_ids",
		"workflowID":   "workflow_id",
		"already_done": "already_done",
		"task-queue":   "task_queue",
		"Task Queue":   "task_queue",
		"Base64Data":   "base64_data",
		"ID":           "id",
		"Error":        "error",
		"ExePath":      "exe_path",
	} {
		assert.Equal(t, want, SnakeCase(in), "SnakeCase(%q)", in)
	}
}

func TestNewRejectsBadLevelAndFormat(t *testing.T) {
	_, err := New(&bytes.Buffer{}, "loud", "json")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"loud"`)
	assert.Contains(t, err.Error(), "debug")

	_, err = New(&bytes.Buffer{}, "info", "xml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"xml"`)
	assert.Contains(t, err.Error(), "json")
}

func TestNewLevelsAndFormats(t *testing.T) {
	for _, lv := range []string{"", "INFO", "Warning", "trace", "disabled"} {
		_, err := ParseLevel(lv)
		assert.NoError(t, err, lv)
	}
	lvl, err := ParseLevel("")
	require.NoError(t, err)
	assert.Equal(t, zerolog.InfoLevel, lvl)

	// A buffer is not a terminal: auto means JSON.
	var buf bytes.Buffer
	zl, err := New(&buf, "info", "auto")
	require.NoError(t, err)
	zl.Info().Str("plan_id", "p1").Msg("hello")
	lines := jsonLines(t, &buf)
	require.Len(t, lines, 1)
	assert.Equal(t, "p1", lines[0]["plan_id"])

	// Console output is human text without color codes when not a terminal.
	buf.Reset()
	zl, err = New(&buf, "info", "console")
	require.NoError(t, err)
	zl.Info().Str("plan_id", "p1").Msg("hello")
	out := buf.String()
	assert.Contains(t, out, "hello")
	assert.Contains(t, out, "plan_id=p1")
	assert.NotContains(t, out, "\x1b[")
}

// Writers from many goroutines through SyncWriters reach a plain
// bytes.Buffer whole: every line parses, none is lost, also when two of the
// wrapped writers are the same buffer (stdout and stderr into one). Under
// -race a SyncWriters that did not lock, or locked each writer apart, fails
// here.
func TestSyncWritersKeepConcurrentLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	ws := SyncWriters(&buf, &buf)
	logs := make([]zerolog.Logger, len(ws))
	for i, w := range ws {
		var err error
		logs[i], err = New(w, "info", FormatJSON)
		require.NoError(t, err)
	}

	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w, log := ws[i%len(ws)], logs[i%len(ws)]
			for j := 0; j < lines; j++ {
				if j%2 == 0 {
					log.Info().Int("writer", i).Int("line", j).Msg("logged")
				} else {
					_, _ = fmt.Fprintf(w, "{\"writer\":%d,\"line\":%d,\"message\":\"narrated\"}\n", i, j)
				}
			}
		}(i)
	}
	wg.Wait()
	got := jsonLines(t, &buf)
	assert.Len(t, got, writers*lines)
}

func TestSyncWritersKeepTerminalDetection(t *testing.T) {
	var buf bytes.Buffer
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer f.Close()
	ws := SyncWriters(&buf, f)
	assert.False(t, IsTerminal(ws[0]), "a buffer is no terminal, wrapped or not")
	_, hasFd := ws[1].(interface{ Fd() uintptr })
	assert.True(t, hasFd, "a wrapped file keeps its Fd for IsTerminal")
	assert.Equal(t, IsTerminal(f), IsTerminal(ws[1]))
}
