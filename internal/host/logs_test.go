package host_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
)

// logStub is an agent that serves logs as the test says: modules it knows
// and their lines, or a function of its own.
type logStub struct {
	stub
	lines map[string]string
	serve func(ctx context.Context, req host.LogsRequest, out io.Writer) error

	mu  sync.Mutex
	got []host.LogsRequest
}

func (s *logStub) Logs(ctx context.Context, req host.LogsRequest, out io.Writer) error {
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	if s.serve != nil {
		return s.serve(ctx, req, out)
	}
	text, ok := s.lines[req.Module]
	if !ok {
		return &host.Refusal{Code: host.CodeNotFound, Message: "module " + req.Module + " does not run here"}
	}
	_, err := io.WriteString(out, text)
	return err
}

func (s *logStub) last() host.LogsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

func TestHandlerLogsNeedsTheToken(t *testing.T) {
	h := host.NewHandler(&logStub{lines: map[string]string{"api": "hello\n"}}, secret)
	for _, auth := range []string{"", "Bearer wrong"} {
		resp, body := do(t, h, http.MethodGet, host.PathLogs+"?module=api", auth, "")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, auth)
		assert.Contains(t, body, `"code":"unauthorized"`)
		assert.NotContains(t, body, "hello")
	}
	resp, body := do(t, h, http.MethodGet, host.PathLogs+"?module=api", "Bearer "+secret, "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, "hello\n", body)
}

func TestHandlerLogsUnknownModuleIs404(t *testing.T) {
	h := host.NewHandler(&logStub{lines: map[string]string{"api": "hello\n"}}, "")
	resp, body := do(t, h, http.MethodGet, host.PathLogs+"?module=web", "", "")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, body, `"code":"not_found"`)
	assert.Contains(t, body, "module web")
}

func TestHandlerLogsWithoutStreamerIs501(t *testing.T) {
	h := host.NewHandler(&stub{}, "")
	resp, body := do(t, h, http.MethodGet, host.PathLogs+"?module=api", "", "")
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode)
	assert.Contains(t, body, `"code":"unsupported"`)
}

func TestHandlerLogsQuery(t *testing.T) {
	for _, tc := range []struct {
		query  string
		status int
		want   host.LogsRequest
		says   string
	}{
		{query: "module=api", status: 200, want: host.LogsRequest{Module: "api", Tail: host.DefaultLogTail}},
		{query: "module=api&tail=0", status: 200, want: host.LogsRequest{Module: "api"}},
		{query: "module=api&tail=10000&follow=1", status: 200, want: host.LogsRequest{Module: "api", Tail: host.MaxLogTail, Follow: true}},
		{query: "module=api&follow=false", status: 200, want: host.LogsRequest{Module: "api", Tail: host.DefaultLogTail}},
		{query: "module=api&tail=10001", status: 400, says: "from 0 to 10000"},
		{query: "module=api&tail=-1", status: 400, says: "from 0 to 10000"},
		{query: "module=api&tail=ten", status: 400, says: "from 0 to 10000"},
		{query: "module=api&follow=maybe", status: 400, says: "want 1 or 0"},
		{query: "", status: 400, says: "module name"},
		{query: "module=..%2F..%2Fetc", status: 400, says: "module name"},
		{query: "module=api&lines=3", status: 400, says: `unknown query parameter \"lines\"`},
		{query: "module=api&tail=1&tail=2", status: 400, says: "given 2 times"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			s := &logStub{lines: map[string]string{"api": "x\n"}}
			resp, body := do(t, host.NewHandler(s, ""), http.MethodGet, host.PathLogs+"?"+tc.query, "", "")
			require.Equal(t, tc.status, resp.StatusCode, body)
			if tc.status != 200 {
				assert.Contains(t, body, `"code":"invalid"`)
				assert.Contains(t, body, tc.says)
				assert.Empty(t, s.got, "a bad query reaches no agent")
				return
			}
			assert.Equal(t, tc.want, s.last())
		})
	}
}

// A failure once the stream has begun cuts the connection: the client
// reads a stream cut short, never one that ended as if all was said.
func TestLogsFailingMidStreamIsCutShort(t *testing.T) {
	s := &logStub{serve: func(_ context.Context, _ host.LogsRequest, out io.Writer) error {
		_, _ = io.WriteString(out, "first\n")
		host.Flush(out)
		return errors.New("disk gone")
	}}
	srv := httptest.NewServer(host.NewHandler(s, secret))
	t.Cleanup(srv.Close)
	var out strings.Builder
	err := client(t, srv.URL).Logs(context.Background(), host.LogsRequest{Module: "api", Tail: 10}, &out)
	require.Error(t, err)
	assert.True(t, host.IsUnreachable(err), "%v", err)
	assert.Contains(t, err.Error(), "stream cut short")
	assert.Equal(t, "first\n", out.String())
}

func TestClientLogs(t *testing.T) {
	s := &logStub{lines: map[string]string{"api": "one\ntwo\n"}}
	srv := httptest.NewServer(host.NewHandler(s, secret))
	t.Cleanup(srv.Close)
	var out strings.Builder
	require.NoError(t, client(t, srv.URL).Logs(context.Background(), host.LogsRequest{Module: "api", Tail: 7}, &out))
	assert.Equal(t, "one\ntwo\n", out.String())
	assert.Equal(t, host.LogsRequest{Module: "api", Tail: 7}, s.last(), "the tail travels as asked")

	err := client(t, srv.URL).Logs(context.Background(), host.LogsRequest{Module: "web", Tail: 7}, &out)
	r, ok := host.IsRefused(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, host.CodeNotFound, r.Code)
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Contains(t, err.Error(), "logs of web")

	anon, err := host.NewHTTPClient(srv.URL, "", nil)
	require.NoError(t, err)
	err = anon.Logs(context.Background(), host.LogsRequest{Module: "api"}, &out)
	_, unauthorized := host.Unauthorized(err)
	assert.True(t, unauthorized, "%v", err)
	noSecret(t, err)
}

// 501 is a refusal to act on (this host keeps no logs), not a host that
// cannot serve now.
func TestClientLogsUnsupportedIsRefused(t *testing.T) {
	srv := httptest.NewServer(host.NewHandler(&stub{}, secret))
	t.Cleanup(srv.Close)
	err := client(t, srv.URL).Logs(context.Background(), host.LogsRequest{Module: "api"}, io.Discard)
	r, ok := host.IsRefused(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, host.CodeUnsupported, r.Code)
	assert.False(t, host.IsUnreachable(err))
}

// A follow outlives the client's timeout (which bounds only the wait for
// the answer to begin), hands each line over as it comes, and ends with the
// caller's context, which the client returns.
func TestClientLogsFollow(t *testing.T) {
	more := make(chan string)
	s := &logStub{serve: func(ctx context.Context, req host.LogsRequest, out io.Writer) error {
		if !req.Follow {
			return errors.New("not a follow")
		}
		host.Flush(out)
		for {
			select {
			case line := <-more:
				if _, err := io.WriteString(out, line); err != nil {
					return err
				}
			case <-ctx.Done():
				return nil
			}
		}
	}}
	srv := httptest.NewServer(host.NewHandler(s, secret))
	t.Cleanup(srv.Close)
	c, err := host.NewHTTPClient(srv.URL, secret, &http.Client{Timeout: 100 * time.Millisecond})
	require.NoError(t, err)

	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Logs(ctx, host.LogsRequest{Module: "api", Follow: true}, pw)
		_ = pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	for i := range 3 {
		time.Sleep(60 * time.Millisecond) // together past the client's timeout
		select {
		case more <- fmt.Sprintf("line %d\n", i):
		case err := <-done:
			t.Fatalf("the follow ended before line %d: %v", i, err)
		}
		require.True(t, lines.Scan())
		assert.Equal(t, fmt.Sprintf("line %d", i), lines.Text())
	}
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, host.IsUnreachable(err))
}

// A host that accepts the request and never answers is unreachable after
// the client's timeout, follow or not.
func TestClientLogsNoAnswerIsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c, err := host.NewHTTPClient(srv.URL, secret, &http.Client{Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	err = c.Logs(context.Background(), host.LogsRequest{Module: "api", Follow: true}, io.Discard)
	assert.True(t, host.IsUnreachable(err), "%v", err)
	assert.Contains(t, err.Error(), "no answer within 50ms")
}

// A host that sends part of a tail and then stops sending, its connection
// still open, is cut off once the client's timeout passes with nothing
// more, and reported unreachable, what it sent already printed; without
// follow nothing waits on it forever.
func TestClientLogsTailStalledMidStreamIsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c, err := host.NewHTTPClient(srv.URL, secret, &http.Client{Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	var out strings.Builder
	err = c.Logs(context.Background(), host.LogsRequest{Module: "api", Tail: 10}, &out)
	require.Error(t, err)
	assert.True(t, host.IsUnreachable(err), "%v", err)
	assert.Contains(t, err.Error(), "logs of api: the host stopped sending for 50ms")
	assert.Equal(t, "first\n", out.String())
}
