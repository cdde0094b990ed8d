// Package logging builds the one zerolog logger meshroll's processes use and
// adapts it to the Temporal SDK's logger interface, so that the SDK's own
// messages (worker start, poll errors, retries, ...) come out in the same
// stream, format and key style as ours.
//
// Key style: every key is snake_case ("workflow_id", "task_queue"). The SDK's
// CamelCase keys ("WorkflowID", "TaskQueue") are converted by the adapter.
// Timestamps are UTC, RFC 3339 with a fixed six-digit fraction
// ("2026-01-02T15:04:05.123456Z"), in the "time" field.
package logging

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Formats accepted by New.
const (
	FormatJSON    = "json"
	FormatConsole = "console"
	FormatAuto    = "auto" // console when the writer is a terminal, else json
)

// TimeFormat is the layout of the "time" field: RFC 3339, UTC, with a fixed
// microsecond fraction so lines sort and align.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// New returns a logger writing to w at the given level ("trace", "debug",
// "info", "warn"/"warning", "error", "fatal", "panic", "disabled"; empty means
// "info") in the given format (FormatJSON, FormatConsole or FormatAuto; empty
// means auto).
//
// It changes none of zerolog's package-level settings.
func New(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), err
	}
	f := strings.ToLower(strings.TrimSpace(format))
	switch f {
	case "", FormatAuto:
		if IsTerminal(w) {
			f = FormatConsole
		} else {
			f = FormatJSON
		}
	case FormatJSON, FormatConsole:
	default:
		return zerolog.Nop(), fmt.Errorf("logging: unknown log format %q (want %q, %q or %q)",
			format, FormatJSON, FormatConsole, FormatAuto)
	}
	if f == FormatConsole {
		w = consoleWriter(w)
	}
	return zerolog.New(w).Level(lvl).Hook(timestampHook{}), nil
}

// ParseLevel parses a level name case-insensitively. Empty means info.
func ParseLevel(level string) (zerolog.Level, error) {
	s := strings.ToLower(strings.TrimSpace(level))
	switch s {
	case "":
		return zerolog.InfoLevel, nil
	case "trace":
		return zerolog.TraceLevel, nil
	case "debug":
		return zerolog.DebugLevel, nil
	case "info":
		return zerolog.InfoLevel, nil
	case "warn", "warning":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	case "fatal":
		return zerolog.FatalLevel, nil
	case "panic":
		return zerolog.PanicLevel, nil
	case "disabled", "off", "none":
		return zerolog.Disabled, nil
	}
	return zerolog.NoLevel, fmt.Errorf("logging: unknown log level %q (want trace, debug, info, warn, error, fatal, panic or disabled)", level)
}

// IsTerminal reports whether w is a terminal (an *os.File, or anything with
// an Fd method, attached to a tty).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	fd := f.Fd()
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}

func consoleWriter(w io.Writer) zerolog.ConsoleWriter {
	noColor := !IsTerminal(w)
	return zerolog.ConsoleWriter{
		Out:     w,
		NoColor: noColor,
		FormatTimestamp: func(i interface{}) string {
			s, ok := i.(string)
			if !ok {
				return fmt.Sprint(i)
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return s
			}
			return t.Local().Format("15:04:05.000")
		},
	}
}

// timestampHook adds the "time" field at write time without touching
// zerolog.TimeFieldFormat (a global other code may rely on or read
// concurrently).
type timestampHook struct{}

func (timestampHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format(TimeFormat))
}

// SyncWriters wraps ws so that their writes share one lock. A logger and a
// narration that share a stream from several goroutines (the in-process
// worker and agents of `starter demo`, say) would otherwise interleave or,
// on a writer that is not safe for concurrent use such as a bytes.Buffer,
// race; one lock for all of ws also covers a caller that passes the same
// writer twice (stdout and stderr into one buffer). Each Write reaches its
// writer whole and alone. Each result keeps its writer's Fd, so IsTerminal
// sees through it.
func SyncWriters(ws ...io.Writer) []io.Writer {
	mu := &sync.Mutex{}
	out := make([]io.Writer, len(ws))
	for i, w := range ws {
		out[i] = &syncWriter{mu: mu, w: w}
	}
	return out
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Fd is w's file descriptor, or an invalid one when w has none, so that
// IsTerminal answers for w.
func (s *syncWriter) Fd() uintptr {
	if f, ok := s.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}
