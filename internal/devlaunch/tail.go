package devlaunch

import (
	"bytes"
	"fmt"
	"sync"
)

// TailBuffer keeps the last bytes a server's output wrote, from a line's
// start where it can, so that a failure can quote the server without a
// long run holding all it said. It is shared by the dev server
// (package devserver) and the production topology's (package prodserver).
type TailBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int
}

// NewTailBuffer keeps at most max bytes.
func NewTailBuffer(max int) *TailBuffer { return &TailBuffer{max: max} }

// Write keeps p, dropping whole lines from the front past max; it never
// fails.
func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		cut := over
		if i := bytes.IndexByte(b.buf[over:], '\n'); i >= 0 && over+i+1 < len(b.buf) {
			cut = over + i + 1
		}
		b.dropped += cut
		b.buf = append(b.buf[:0], b.buf[cut:]...)
	}
	return len(p), nil
}

// String is what is kept, after a line saying how much was dropped.
func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[... %d earlier bytes dropped ...]\n%s", b.dropped, b.buf)
	}
	return string(b.buf)
}
