package logging

import (
	"fmt"
	"strings"
	"sync"
	"unicode"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/log"
)

// Temporal adapts l to the Temporal SDK's logger, for client.Options.Logger
// and friends. The SDK's key/value pairs become zerolog fields with keys
// converted to snake_case ("WorkflowID" -> "workflow_id"). An error value is
// written as its message. A trailing key without a value is kept under
// "unpaired".
func Temporal(l zerolog.Logger) log.Logger {
	return temporalLogger{l: l}
}

type temporalLogger struct {
	l zerolog.Logger
}

var (
	_ log.Logger     = temporalLogger{}
	_ log.WithLogger = temporalLogger{}
)

func (t temporalLogger) Debug(msg string, keyvals ...interface{}) {
	write(t.l.Debug(), msg, keyvals)
}

func (t temporalLogger) Info(msg string, keyvals ...interface{}) {
	write(t.l.Info(), msg, keyvals)
}

func (t temporalLogger) Warn(msg string, keyvals ...interface{}) {
	write(t.l.Warn(), msg, keyvals)
}

func (t temporalLogger) Error(msg string, keyvals ...interface{}) {
	write(t.l.Error(), msg, keyvals)
}

// With returns a logger that adds keyvals to every message.
func (t temporalLogger) With(keyvals ...interface{}) log.Logger {
	if len(keyvals) == 0 {
		return t
	}
	return temporalLogger{l: t.l.With().Fields(convertKeyvals(keyvals)).Logger()}
}

func write(e *zerolog.Event, msg string, keyvals []interface{}) {
	if e == nil { // level disabled
		return
	}
	if len(keyvals) > 0 {
		e = e.Fields(convertKeyvals(keyvals))
	}
	e.Msg(msg)
}

// convertKeyvals returns a copy of keyvals with snake_case string keys, in
// the alternating form zerolog's Fields accepts.
func convertKeyvals(keyvals []interface{}) []interface{} {
	out := make([]interface{}, 0, len(keyvals)+1)
	for i := 0; i < len(keyvals); i += 2 {
		if i+1 == len(keyvals) {
			out = append(out, "unpaired", keyvals[i])
			break
		}
		var key string
		if s, ok := keyvals[i].(string); ok {
			key = s
		} else {
			key = fmt.Sprint(keyvals[i])
		}
		out = append(out, SnakeCase(key), keyvals[i+1])
	}
	return out
}

var snakeCache sync.Map // string -> string; the SDK uses a small fixed key set

// SnakeCase converts a key to snake_case: "WorkflowID" -> "workflow_id",
// "HTTPPort" -> "http_port", "workflowIDs" -> "workflow_ids",
// "Task Queue" / "task-queue" -> "task_queue". Keys already in snake_case are
// returned unchanged.
func SnakeCase(key string) string {
	if v, ok := snakeCache.Load(key); ok {
		return v.(string)
	}
	s := snakeCase(key)
	snakeCache.Store(key, s)
	return s
}

func snakeCase(key string) string {
	rs := []rune(key)
	var b strings.Builder
	b.Grow(len(key) + 4)
	sep := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			sep()
			continue
		}
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			switch {
			case unicode.IsLower(prev) || unicode.IsDigit(prev):
				// "workflowID": boundary before "I".
				sep()
			case unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]) && !isPluralS(rs, i+1):
				// "HTTPPort": boundary before the "P" of "Port", but
				// "WorkflowIDs" keeps "IDs" whole.
				sep()
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return strings.TrimSuffix(b.String(), "_")
}

// isPluralS reports whether rs[i] is a lone lowercase "s" ending a word, as
// in the "s" of "IDs".
func isPluralS(rs []rune, i int) bool {
	if rs[i] != 's' {
		return false
	}
	return i+1 == len(rs) || !unicode.IsLower(rs[i+1])
}
