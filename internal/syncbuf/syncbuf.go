// Package syncbuf is a bytes.Buffer safe for concurrent use: what a test
// reads while a server's output goroutines, a stream or a command write it;
// and Writes, which keeps a watch's refreshes apart and ends the watch.
// Tests of several packages share it; nothing outside tests needs it.
package syncbuf

import (
	"bytes"
	"context"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Writes keeps each Write apart, for a test of a command that writes each
// refresh in one Write (a watch), and calls Cancel at the Nth Write, so
// that the test ends the command once that refresh is printed, without
// waiting for time to pass.
type Writes struct {
	// N is the Write at which Cancel is called: 1 is the first.
	N int
	// Cancel ends the command's context.
	Cancel context.CancelFunc

	mu     sync.Mutex
	writes []string
}

// Write keeps p as one write; it never fails.
func (w *Writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	if len(w.writes) == w.N {
		w.Cancel()
	}
	return len(p), nil
}

// All is every write so far, in order.
func (w *Writes) All() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}
