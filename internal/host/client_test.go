package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

const secret = "s3cr3t-token-value"

var digestA = "sha256:" + strings.Repeat("a", 64)

func decl(seq uint64) mesh.Declaration {
	return mesh.Declaration{
		Machine: "m1", Seq: seq, Plan: "plan/api/c", Request: "plan/api/c@m1",
		Containers: []mesh.Container{{Module: "api", Digest: digestA, Generation: 3}},
	}
}

// server answers every request with status and body, and records the last
// request it saw.
func server(t *testing.T, status int, body string) (*httptest.Server, *http.Request) {
	t.Helper()
	seen := new(http.Request)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seen = *r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func client(t *testing.T, url string) *host.HTTPClient {
	t.Helper()
	c, err := host.NewHTTPClient(url, secret, nil)
	require.NoError(t, err)
	return c
}

// noSecret checks that an error never carries the token.
func noSecret(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		assert.NotContains(t, s, secret)
	}
}

func TestReportSuccess(t *testing.T) {
	want := mesh.Report{Machine: "m1", LastSeq: 4, LastRequest: "r", Containers: []mesh.RunningContainer{
		{Module: "api", Digest: digestA, Generation: 3, Seq: 4, State: mesh.StateRunning},
	}}
	b, err := json.Marshal(want)
	require.NoError(t, err)
	srv, seen := server(t, http.StatusOK, string(b))

	got, err := client(t, srv.URL+"/").Report(context.Background())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, http.MethodGet, seen.Method)
	assert.Equal(t, host.PathReport, seen.URL.Path)
	assert.Equal(t, "Bearer "+secret, seen.Header.Get("Authorization"))
}

func TestApplySuccess(t *testing.T) {
	var got mesh.Declaration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, http.MethodPost, r.Method)
		assert.Equal(t, host.PathDeclarations, r.URL.Path)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		_, _ = io.WriteString(w, `{"seq":7,"repeat":true}`)
	}))
	t.Cleanup(srv.Close)

	res, err := client(t, srv.URL).Apply(context.Background(), decl(7))
	require.NoError(t, err)
	assert.Equal(t, host.ApplyResult{Seq: 7, Repeat: true}, res)
	assert.Equal(t, decl(7), got)
}

func TestApplyAnsweredForOtherSeq(t *testing.T) {
	srv, _ := server(t, http.StatusOK, `{"seq":8,"repeat":false}`)
	_, err := client(t, srv.URL).Apply(context.Background(), decl(7))
	noSecret(t, err)
	assert.Contains(t, err.Error(), "answered for sequence 8")
}

func TestApplyRefusedSequence(t *testing.T) {
	srv, _ := server(t, http.StatusConflict,
		`{"error":{"code":"sequence","message":"declaration 7 is at or below the last applied","last_seq":9}}`)
	_, err := client(t, srv.URL).Apply(context.Background(), decl(7))
	noSecret(t, err)

	r, ok := host.IsRefused(fmt.Errorf("push: %w", err))
	require.True(t, ok)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, host.CodeSequence, r.Code)
	assert.Equal(t, uint64(9), r.LastSeq)
	assert.Equal(t, "declaration 7 is at or below the last applied", r.Message)
	assert.Equal(t, "host "+srv.URL+": refused declaration 7: sequence: declaration 7 is at or below the last applied (last applied 9)", err.Error())
	assert.False(t, host.IsUnreachable(err))
}

func TestUnauthorized(t *testing.T) {
	srv, _ := server(t, http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"missing or wrong bearer token","last_seq":0}}`)
	_, err := client(t, srv.URL).Report(context.Background())
	noSecret(t, err)
	r, ok := host.IsRefused(err)
	require.True(t, ok)
	assert.Equal(t, http.StatusUnauthorized, r.Status)
	assert.Equal(t, host.CodeUnauthorized, r.Code)
	assert.Equal(t, "host "+srv.URL+": refused report: unauthorized: missing or wrong bearer token", err.Error())
	status, ok := host.Unauthorized(fmt.Errorf("read: %w", err))
	assert.True(t, ok)
	assert.Equal(t, http.StatusUnauthorized, status)
}

// A 401 or 403 from something in front of the agent (no error body) is
// told apart too, and reads as before.
func TestUnauthorizedByAProxy(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv, _ := server(t, status, `<html>Forbidden</html>`)
		_, err := client(t, srv.URL).Report(context.Background())
		noSecret(t, err)
		got, ok := host.Unauthorized(err)
		assert.True(t, ok, status)
		assert.Equal(t, status, got)
		_, refused := host.IsRefused(err)
		assert.False(t, refused, "not the agent's refusal")
		assert.False(t, host.IsUnreachable(err))
		assert.Equal(t, fmt.Sprintf("host %s: report: unexpected status %d: \"<html>Forbidden</html>\"", srv.URL, status), err.Error())
	}
	srv, _ := server(t, http.StatusNotFound, `nope`)
	_, err := client(t, srv.URL).Report(context.Background())
	require.Error(t, err)
	_, ok := host.Unauthorized(err)
	assert.False(t, ok)
}

func TestConnectionRefusedIsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()

	_, err := client(t, url).Apply(context.Background(), decl(1))
	noSecret(t, err)
	var u *host.UnreachableError
	require.ErrorAs(t, err, &u)
	assert.Equal(t, url, u.URL)
	_, refused := host.IsRefused(err)
	assert.False(t, refused)
}

func TestServerErrorIsUnreachable(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusBadGateway, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv, _ := server(t, status, `{"error":{"code":"internal","message":"boom"}}`)
			_, err := client(t, srv.URL).Report(context.Background())
			noSecret(t, err)
			assert.True(t, host.IsUnreachable(err), "%v", err)
			_, refused := host.IsRefused(err)
			assert.False(t, refused)
			assert.Contains(t, err.Error(), fmt.Sprintf("status %d", status))
		})
	}
}

func TestTimeoutIsUnreachable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	c, err := host.NewHTTPClient(srv.URL, secret, &http.Client{Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.Report(context.Background())
	noSecret(t, err)
	assert.True(t, host.IsUnreachable(err), "%v", err)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = client(t, srv.URL).Report(ctx)
	assert.True(t, host.IsUnreachable(err), "%v", err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCallerCancelIsNotUnreachable(t *testing.T) {
	srv, _ := server(t, http.StatusOK, `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := client(t, srv.URL).Report(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, host.IsUnreachable(err))
}

func TestMalformedAnswer(t *testing.T) {
	for name, body := range map[string]string{
		"report": `{"machine":`,
		"apply":  `not json`,
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := server(t, http.StatusOK, body)
			c := client(t, srv.URL)
			var err error
			if name == "report" {
				_, err = c.Report(context.Background())
			} else {
				_, err = c.Apply(context.Background(), decl(1))
			}
			noSecret(t, err)
			assert.Contains(t, err.Error(), "decode answer")
			assert.False(t, host.IsUnreachable(err))
			_, refused := host.IsRefused(err)
			assert.False(t, refused)
		})
	}
}

func TestUnexpectedClientStatusWithoutErrorBody(t *testing.T) {
	srv, _ := server(t, http.StatusNotFound, "404 page not found")
	_, err := client(t, srv.URL).Report(context.Background())
	noSecret(t, err)
	assert.Contains(t, err.Error(), "status 404")
	_, refused := host.IsRefused(err)
	assert.False(t, refused)
	assert.False(t, host.IsUnreachable(err))
}

func TestRedirectNotFollowed(t *testing.T) {
	target, _ := server(t, http.StatusOK, `{"seq":1}`)
	srv := httptest.NewServer(http.RedirectHandler(target.URL+host.PathDeclarations, http.StatusFound))
	t.Cleanup(srv.Close)
	_, err := client(t, srv.URL).Apply(context.Background(), decl(1))
	noSecret(t, err)
	assert.Contains(t, err.Error(), "status 302")
}

func TestNewHTTPClientValidates(t *testing.T) {
	for _, u := range []string{
		"", "localhost:8080", "ftp://h", "http://", "http://u:p@h", "http://h/?x=1", "http://h/#f", "::",
	} {
		_, err := host.NewHTTPClient(u, "", nil)
		assert.Error(t, err, "url %q", u)
	}
	_, err := host.NewHTTPClient("http://h", "bad token\n"+secret, nil)
	noSecret(t, err)

	c, err := host.NewHTTPClient("https://h:8443/agent/", secret, nil)
	require.NoError(t, err)
	assert.Equal(t, "https://h:8443/agent", c.URL())
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", *c), fmt.Sprintf("%s", c)} {
		assert.NotContains(t, s, secret)
		assert.Contains(t, s, "https://h:8443/agent")
	}
}

func TestUnreachableUnwraps(t *testing.T) {
	cause := errors.New("cause")
	err := error(&host.UnreachableError{URL: "http://h", Err: cause})
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, "host http://h: unreachable: cause", err.Error())
}

func TestWaitReport(t *testing.T) {
	t.Run("sends the poll and reads the revision", func(t *testing.T) {
		srv, seen := reportServer(t, "17")
		rep, rev, err := client(t, srv.URL).WaitReport(context.Background(), 9, 2*time.Second)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), rep.LastSeq)
		assert.Equal(t, uint64(17), rev)
		assert.Equal(t, url.Values{host.QueryAfter: {"9"}, host.QueryWait: {"2s"}}, <-seen)
	})
	t.Run("a plain read sends no parameters", func(t *testing.T) {
		srv, seen := reportServer(t, "")
		_, rev, err := client(t, srv.URL).WaitReport(context.Background(), 0, 0)
		require.NoError(t, err)
		assert.Zero(t, rev, "a host without the header does not long-poll")
		assert.Empty(t, <-seen)
	})
	t.Run("a bad revision is an error", func(t *testing.T) {
		srv, _ := reportServer(t, "soon")
		_, _, err := client(t, srv.URL).WaitReport(context.Background(), 0, 0)
		assert.ErrorContains(t, err, "is not a revision")
	})
	t.Run("the wait stretches the client's timeout", func(t *testing.T) {
		answer := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-answer
			_, _ = io.WriteString(w, `{"machine":"m1","containers":[]}`)
		}))
		t.Cleanup(srv.Close)
		c, err := host.NewHTTPClient(srv.URL, "", &http.Client{Timeout: 50 * time.Millisecond})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, _, err := c.WaitReport(context.Background(), 1, time.Minute)
			done <- err
		}()
		// What is tested is that nothing happens for longer than the
		// client's own timeout: four of them.
		select {
		case err := <-done:
			t.Fatalf("answered before the host did: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		close(answer)
		require.NoError(t, <-done)
	})
}

// reportServer answers every request with a report of last_seq 3, naming
// rev as its revision unless rev is empty, and sends each request's query
// on the channel.
func reportServer(t *testing.T, rev string) (*httptest.Server, <-chan url.Values) {
	t.Helper()
	seen := make(chan url.Values, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Query()
		if rev != "" {
			w.Header().Set(host.HeaderReportRevision, rev)
		}
		_, _ = io.WriteString(w, `{"machine":"m1","last_seq":3,"containers":[]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

// A client made without an *http.Client of its own keeps its connection to
// each host between requests, however many hosts answer at once: a worker
// long-polls every host of its fleet, and a tier's pushes change hundreds
// of hosts' reports together. http.DefaultTransport keeps 100 idle
// connections across all hosts, and closed the rest, each dialled again
// for the next request. Here 150 hosts answer before any is asked again.
func TestClientsKeepAConnectionPerHostAcrossAFleet(t *testing.T) {
	const hosts = 150
	dialled := make([]atomic.Int32, hosts)
	clients := make([]*host.HTTPClient, hosts)
	for i := range hosts {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"machine":"m1"}`)
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				dialled[i].Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		c, err := host.NewHTTPClient(srv.URL, "", nil)
		require.NoError(t, err)
		clients[i] = c
	}
	for range 3 {
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				_, err := c.Report(context.Background())
				assert.NoError(t, err)
			})
		}
		wg.Wait()
	}
	for i := range hosts {
		assert.EqualValues(t, 1, dialled[i].Load(), "connections to host %d over three rounds", i)
	}
}
