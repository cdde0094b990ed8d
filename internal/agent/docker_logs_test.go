package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
)

// frame is one frame of the engine's multiplexed output.
func frame(stream byte, payload string) []byte {
	hdr := []byte{stream, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	return append(hdr, payload...)
}

func frames(fs ...[]byte) []byte { return bytes.Join(fs, nil) }

// chunked reads its bytes in pieces of the sizes given (the last repeated),
// as a socket may hand over a stream: headers and payloads split anywhere.
type chunked struct {
	b     []byte
	sizes []int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[0]
	if len(c.sizes) > 1 {
		c.sizes = c.sizes[1:]
	}
	n = min(n, len(p), len(c.b))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func TestDemux(t *testing.T) {
	two := frames(frame(1, "out one\n"), frame(2, "err one\n"), frame(1, "out two\n"))
	for _, tc := range []struct {
		name    string
		in      []byte
		sizes   []int
		want    string
		wantErr error
	}{
		{name: "stdout and stderr as they came", in: two, sizes: []int{4096}, want: "out one\nerr one\nout two\n"},
		{name: "one byte at a time", in: two, sizes: []int{1}, want: "out one\nerr one\nout two\n"},
		{name: "headers split across reads", in: two, sizes: []int{3, 7, 5, 11}, want: "out one\nerr one\nout two\n"},
		{name: "empty stream", in: nil, sizes: []int{1}, want: ""},
		{name: "empty frame", in: frames(frame(1, ""), frame(1, "x\n")), sizes: []int{2}, want: "x\n"},
		{name: "a line in two frames", in: frames(frame(1, "hal"), frame(1, "f\n")), sizes: []int{64}, want: "half\n"},
		{name: "stdin frame passes", in: frame(0, "in\n"), sizes: []int{64}, want: "in\n"},
		{name: "truncated payload", in: frames(frame(1, "whole\n"), frame(2, "cut short\n")[:12]), sizes: []int{5}, want: "whole\ncut ", wantErr: io.ErrUnexpectedEOF},
		{name: "truncated header", in: frames(frame(1, "whole\n"), frame(1, "x")[:5]), sizes: []int{64}, want: "whole\n", wantErr: io.ErrUnexpectedEOF},
		{name: "raw output of a terminal", in: []byte("plain text from a tty\n"), sizes: []int{64}, want: "", wantErr: errNotMultiplexed},
		{name: "unknown stream", in: frame(3, "x\n"), sizes: []int{64}, want: "", wantErr: errNotMultiplexed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := demux(&out, &chunked{b: tc.in, sizes: tc.sizes})
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.want, out.String())
		})
	}
}

// logsEngine answers the logs API for container c1 with body, recording the
// query it was asked.
func logsEngine(t *testing.T, body []byte) (*DockerRuntime, *url.Values) {
	var asked url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/containers/c1/logs" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"no such container"}`))
			return
		}
		asked = r.URL.Query()
		w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	r := NewDockerRuntime(testMachine, srv.URL)
	r.current["api"] = &dockerContainer{id: "c1"}
	return r, &asked
}

func TestDockerLogs(t *testing.T) {
	r, asked := logsEngine(t, frames(frame(1, "started\n"), frame(2, "warning\n")))
	var out strings.Builder
	require.NoError(t, r.Logs(context.Background(), "api", 20, true, &out))
	assert.Equal(t, "started\nwarning\n", out.String())
	assert.Equal(t, url.Values{"stdout": {"1"}, "stderr": {"1"}, "tail": {"20"}, "follow": {"1"}}, *asked)

	require.NoError(t, r.Logs(context.Background(), "api", 0, false, io.Discard))
	assert.Equal(t, url.Values{"stdout": {"1"}, "stderr": {"1"}, "tail": {"0"}}, *asked, "no follow unless asked")

	var refused *host.Refusal
	err := r.Logs(context.Background(), "web", 20, false, io.Discard)
	require.True(t, errors.As(err, &refused), "%v", err)
	assert.Equal(t, host.CodeNotFound, refused.Code)
	assert.Contains(t, refused.Message, "module web has no container yet")
}

func TestDockerLogsCutShort(t *testing.T) {
	r, _ := logsEngine(t, frames(frame(1, "started\n"), frame(1, "cut short\n")[:10]))
	var out strings.Builder
	err := r.Logs(context.Background(), "api", 20, false, &out)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Contains(t, err.Error(), "runtime docker: logs of api")
	assert.Equal(t, "started\ncu", out.String())
}

// The agent serves logs only of a module its declaration names, and says
// so of a runtime that keeps none; over the wire these are 404 and 501.
func TestAgentLogsRefusals(t *testing.T) {
	h := newHarness(t, t.TempDir(), withToken(testToken))
	h.mustApply(decl(1, ctr("api", 1), ctr("web", 1)))

	err := h.c.Logs(context.Background(), host.LogsRequest{Module: "db", Tail: 10}, io.Discard)
	r := requireRefused(t, err, host.CodeNotFound)
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Contains(t, r.Message, "module db is not declared on machine edge-1 (it runs api, web)")

	err = h.c.Logs(context.Background(), host.LogsRequest{Module: "api", Tail: 10}, io.Discard)
	r = requireRefused(t, err, host.CodeUnsupported)
	assert.Equal(t, http.StatusNotImplemented, r.Status)
	assert.Contains(t, r.Message, "runtime noop keeps no container logs")

	anon, err := host.NewHTTPClient(h.srv.URL, "", nil)
	require.NoError(t, err)
	err = anon.Logs(context.Background(), host.LogsRequest{Module: "api", Tail: 10}, io.Discard)
	requireRefused(t, err, host.CodeUnauthorized)
}

// followRuntime is a noop runtime whose logs are a follow that writes one
// line and then waits for its context.
type followRuntime struct{ *NoopRuntime }

func (followRuntime) Logs(ctx context.Context, _ string, _ int, _ bool, out io.Writer) error {
	_, _ = io.WriteString(out, "following\n")
	host.Flush(out)
	<-ctx.Done()
	return nil
}

// Shutting the agent's server down ends the follows it serves, so that a
// person following a container's logs does not hold up the agent's stop.
func TestShutdownEndsFollows(t *testing.T) {
	a, err := Open(context.Background(), Options{Machine: testMachine, StateDir: t.TempDir(), Runtime: followRuntime{NewNoopRuntime(0)}, Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	_, err = a.Apply(context.Background(), decl(1, ctr("api", 1)))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := NewServer(a, "")
	go func() { _ = srv.Serve(ln) }()
	c, err := host.NewHTTPClient("http://"+ln.Addr().String(), "", nil)
	require.NoError(t, err)

	pr, pw := io.Pipe()
	ended := make(chan error, 1)
	go func() {
		ended <- c.Logs(context.Background(), host.LogsRequest{Module: "api", Follow: true}, pw)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "following\n", line)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx), "shutdown waits for no follow")
	select {
	case err := <-ended:
		require.NoError(t, err, "the follow ends as the host ended it")
	case <-time.After(waitLimit):
		t.Fatal("the follow outlived the server")
	}
}
