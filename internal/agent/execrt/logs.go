package execrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// logPoll is how often a follow looks for what the process wrote since:
// a stat of the log file, and a read of what it grew by.
const logPoll = 200 * time.Millisecond

// Logs writes the last tail lines of module's log file (every process of
// the module appends there, "meshroll exec:" lines included; see the
// package comment) to out and, with follow, what is appended next, until
// ctx ends or the module's current instance is gone (stopped, replaced or
// removed; its last words are sent first). A module with no instance now
// is sent its tail and nothing follows.
func (r *Runtime) Logs(ctx context.Context, module string, tail int, follow bool, out io.Writer) error {
	if err := mesh.ValidName("module", module); err != nil {
		// The name becomes a file name.
		return fmt.Errorf("runtime exec: %w", err)
	}
	var done <-chan struct{}
	if follow {
		r.mu.Lock()
		if ct := r.current[module]; ct != nil {
			done = ct.done
		}
		r.mu.Unlock()
	}
	if err := streamFile(ctx, r.logPath(module), tail, done, out, logPoll); err != nil {
		return fmt.Errorf("runtime exec: logs of %s: %w", module, err)
	}
	return nil
}

// streamFile writes the last tail lines of the file at path to out and,
// unless done is nil, what is appended to it after, looking every poll,
// until ctx ends or done is closed (then what was appended by that time is
// sent too). A file that does not exist yet is empty; one that shrinks
// (truncated) is read again from its start.
func streamFile(ctx context.Context, path string, tail int, done <-chan struct{}, out io.Writer, poll time.Duration) error {
	lf := &logFile{path: path}
	defer lf.close()
	if err := lf.open(); err != nil {
		return err
	}
	if lf.f != nil {
		off, err := tailOffset(lf.f, tail)
		if err != nil {
			return err
		}
		lf.off = off
	}
	if err := lf.copyNew(out); err != nil {
		return err
	}
	host.Flush(out)
	if done == nil {
		return nil
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return lf.copyNew(out)
		case <-t.C:
			if err := lf.copyNew(out); err != nil {
				return err
			}
		}
	}
}

// logFile is a log being read: the file, once it exists, and how far it
// was sent.
type logFile struct {
	path string
	f    *os.File
	off  int64
}

// open opens the file if it exists; a missing one is left for later.
func (l *logFile) open() error {
	if l.f != nil {
		return nil
	}
	f, err := os.Open(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

func (l *logFile) close() {
	if l.f != nil {
		_ = l.f.Close()
	}
}

// copyNew writes what the file holds past what was sent.
func (l *logFile) copyNew(out io.Writer) error {
	if err := l.open(); err != nil || l.f == nil {
		return err
	}
	st, err := l.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size < l.off {
		l.off = 0 // truncated: what is there now is new
	}
	if size == l.off {
		return nil
	}
	n, err := io.Copy(out, io.NewSectionReader(l.f, l.off, size-l.off))
	l.off += n
	return err
}

// tailChunk is how much of a log tailOffset reads at a time, from its end.
const tailChunk = 64 << 10

// tailOffset is where the last n lines of f begin: after the n-th newline
// from the end, not counting one that ends the file (a last line without a
// newline counts as a line). It reads from the end, so a long log costs
// only what is asked for.
func tailOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := st.Size()
	if n <= 0 || end == 0 {
		return end, nil
	}
	buf := make([]byte, tailChunk)
	pos, seen := end, 0
	for pos > 0 {
		size := min(int64(len(buf)), pos)
		pos -= size
		chunk := buf[:size]
		if _, err := f.ReadAt(chunk, pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if pos+size == end && chunk[size-1] == '\n' {
			chunk = chunk[:size-1] // the newline ending the file ends the last line
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if i = bytes.LastIndexByte(chunk[:i+1], '\n'); i < 0 {
				break
			}
			if seen++; seen == n {
				return pos + int64(i) + 1, nil
			}
		}
	}
	return 0, nil
}
