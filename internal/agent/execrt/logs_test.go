//go:build unix

package execrt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/syncbuf"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "web.log")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// numbered is lines "line 1\n" to "line n\n", each padded to width bytes
// with its newline, so that a big one spans tailOffset's chunks.
func numbered(from, to, width int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		s := fmt.Sprintf("line %d", i)
		b.WriteString(s + strings.Repeat(".", max(0, width-len(s)-1)) + "\n")
	}
	return b.String()
}

func TestTail(t *testing.T) {
	big := numbered(1, 3000, 100) // 300 kB: five of tailChunk
	for _, tc := range []struct {
		name    string
		content string
		n       int
		want    string
	}{
		{name: "last two", content: "a\nb\nc\n", n: 2, want: "b\nc\n"},
		{name: "all of a short file", content: "a\nb\nc\n", n: 10, want: "a\nb\nc\n"},
		{name: "exactly all", content: "a\nb\nc\n", n: 3, want: "a\nb\nc\n"},
		{name: "none", content: "a\nb\nc\n", n: 0, want: ""},
		{name: "last line without a newline counts", content: "a\nb\nc", n: 2, want: "b\nc"},
		{name: "empty lines count", content: "a\n\n\nb\n", n: 3, want: "\n\nb\n"},
		{name: "empty file", content: "", n: 5, want: ""},
		{name: "one line", content: "only\n", n: 1, want: "only\n"},
		{name: "across chunks", content: big, n: 1500, want: numbered(1501, 3000, 100)},
		{name: "at a chunk's edge", content: big, n: 656, want: numbered(2345, 3000, 100)},
		{name: "a line longer than a chunk", content: "first\n" + strings.Repeat("x", 3*tailChunk) + "\nlast\n", n: 2, want: strings.Repeat("x", 3*tailChunk) + "\nlast\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, streamFile(context.Background(), writeFile(t, tc.content), tc.n, nil, &out, time.Hour))
			assert.Equal(t, tc.want, out.String())
		})
	}
}

func TestTailOfNoFileIsEmpty(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, streamFile(context.Background(), filepath.Join(t.TempDir(), "none.log"), 10, nil, &out, time.Hour))
	assert.Empty(t, out.String())
}

// A follow sends the tail, then each line as it is appended, until done is
// closed (with what was appended by then) or ctx ends.
func TestFollow(t *testing.T) {
	path := writeFile(t, "old 1\nold 2\nold 3\n")
	done := make(chan struct{})
	var out syncbuf.Buffer
	ended := make(chan error, 1)
	go func() { ended <- streamFile(context.Background(), path, 1, done, &out, 5*time.Millisecond) }()

	eventually(t, "the tail", func() bool { return out.String() == "old 3\n" })
	appendFile(t, path, "new 1\n")
	eventually(t, "the appended line", func() bool { return out.String() == "old 3\nnew 1\n" })
	appendFile(t, path, "new 2\nlast words\n")
	close(done)
	select {
	case err := <-ended:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("the follow did not end with its container")
	}
	assert.Equal(t, "old 3\nnew 1\nnew 2\nlast words\n", out.String(), "last words are sent")
}

func TestFollowEndsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.log")
	ctx, cancel := context.WithCancel(context.Background())
	var out syncbuf.Buffer
	ended := make(chan error, 1)
	go func() { ended <- streamFile(ctx, path, 10, make(chan struct{}), &out, 5*time.Millisecond) }()

	appendFile(t, path, "written once the follow began\n")
	eventually(t, "a file that did not exist yet", func() bool { return out.String() == "written once the follow began\n" })
	require.NoError(t, os.Truncate(path, 0))
	appendFile(t, path, "after a truncation\n")
	eventually(t, "a truncated file, read again", func() bool {
		return out.String() == "written once the follow began\nafter a truncation\n"
	})
	cancel()
	select {
	case err := <-ended:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("the follow did not end with its context")
	}
}

// Through the runtime: the log of a real process, followed until the
// container is replaced, whose last words (its SIGTERM) the follow sends
// before it ends; a module without an instance gets its tail and no
// follow.
func TestLogsFollowsAContainerUntilReplaced(t *testing.T) {
	t.Parallel()
	reg, v1, v2, dir := twoWebBuilds(t)
	r, rec := newRuntime(t, dir, reg)
	rec.applyRunning(r, ctr("web", v1))
	logHas(t, dir, "web", "testapp v1 mode serve")

	var tail bytes.Buffer
	require.NoError(t, r.Logs(context.Background(), "web", 1, false, &tail))
	assert.Equal(t, 1, strings.Count(tail.String(), "\n"), tail.String())

	var out syncbuf.Buffer
	ended := make(chan error, 1)
	go func() { ended <- r.Logs(context.Background(), "web", 100, true, &out) }()
	eventually(t, "the tail of v1's log", func() bool { return strings.Contains(out.String(), "testapp v1 mode serve") })

	c2 := ctr("web", v2)
	c2.Generation = 2
	rec.applyRunning(r, c2)
	select {
	case err := <-ended:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("the follow did not end when its container was replaced")
	}
	assert.Contains(t, out.String(), "testapp v1 got SIGTERM", "the replaced process's last words")

	require.NoError(t, r.Apply(context.Background(), nil, rec.update))
	var gone bytes.Buffer
	require.NoError(t, r.Logs(context.Background(), "web", 100, true, &gone), "no instance: the tail, and no follow")
	assert.Contains(t, gone.String(), "testapp v2 mode serve")

	assert.ErrorContains(t, r.Logs(context.Background(), "../web", 1, false, &gone), "module name")
}
