package build

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

const (
	// tailLines is how many of a failed build's last output lines its
	// error keeps: enough for a compiler's report, small enough for a
	// workflow failure message.
	tailLines = 40
	// maxLine truncates one kept line, so a minified blob of output cannot
	// blow up the error.
	maxLine = 512
	// DefaultProgressInterval is how often Request.Progress is called.
	DefaultProgressInterval = 5 * time.Second
)

// tail keeps the last lines written to it.
type tail struct {
	mu      sync.Mutex
	lines   []string
	next    int
	full    bool
	partial []byte
}

func newTail() *tail { return &tail{lines: make([]string, tailLines)} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(t.partial) < maxLine {
				t.partial = append(t.partial, p[:min(len(p), maxLine-len(t.partial))]...)
			}
			break
		}
		if len(t.partial) < maxLine {
			t.partial = append(t.partial, p[:min(i, maxLine-len(t.partial))]...)
		}
		t.add(string(t.partial))
		t.partial = t.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (t *tail) add(line string) {
	t.lines[t.next] = strings.TrimRight(line, "\r")
	t.next = (t.next + 1) % len(t.lines)
	if t.next == 0 {
		t.full = true
	}
}

// String is the kept lines, oldest first.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	if t.full {
		out = append(out, t.lines[t.next:]...)
	}
	out = append(out, t.lines[:t.next]...)
	if len(t.partial) > 0 {
		out = append(out, string(t.partial))
	}
	return strings.Join(out, "\n")
}

// failure is a build error carrying the last lines of its output, which is
// what an operator looking at the plan needs to see.
func failure(what string, err error, t *tail) error {
	out := strings.TrimSpace(t.String())
	if out == "" {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w\n--- last lines of output ---\n%s", what, err, out)
}

// run is one build's output plumbing: the stream to Request.Output, the
// tail kept for errors, and the progress ticker.
type run struct {
	// out is what commands write to: Request.Output and the tail.
	out  io.Writer
	log  io.Writer
	tail *tail
	stop func()
}

func startRun(ctx context.Context, r Request, interval time.Duration) *run {
	t := newTail()
	var w, log io.Writer = t, io.Discard
	if r.Output != nil {
		w, log = io.MultiWriter(r.Output, t), r.Output
	}
	return &run{out: w, log: log, tail: t, stop: heartbeat(ctx, r.Progress, interval)}
}

// logf writes one line of the builder's own narration to Request.Output
// (not to the tail: a failure's error is for the command's output).
func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "meshroll: "+format+"\n", args...)
}

// heartbeat calls progress now and every interval until the returned stop
// is called; stop waits, so progress is never called after it returns.
func heartbeat(ctx context.Context, progress func(), interval time.Duration) func() {
	if progress == nil {
		return func() {}
	}
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	progress()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				progress()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done); <-finished })
	}
}

// LineWriter turns a byte stream into whole lines handed to a function, for
// wiring Request.Output to a structured logger: one log event per line of
// compiler output, tagged with the plan's ID. Close flushes a last line
// without a newline.
type LineWriter struct {
	mu   sync.Mutex
	emit func(string)
	buf  []byte
}

// maxBufferedLine bounds a line LineWriter waits on.
const maxBufferedLine = 64 << 10

// NewLineWriter returns a LineWriter calling emit for every line.
func NewLineWriter(emit func(line string)) *LineWriter { return &LineWriter{emit: emit} }

// Write implements io.Writer.
func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxBufferedLine {
		// A progress bar redrawn with \r never ends its line.
		w.emit(string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}

// Close emits what is left of an unterminated last line.
func (w *LineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
	return nil
}
