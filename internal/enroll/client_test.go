package enroll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const clientTestToken = "enr-0lL9-s3cret"

var clientTestAsk = Ask{Machine: "edge-1", Host: "http://10.0.0.7:7400", Labels: map[string]string{"site": "lab", "ring": "canary"}}

// canned is one answer of a fakeEndpoint: a status, and a body sent as is.
type canned struct {
	status int
	body   string
}

// answerJSON is the JSON of an Answer.
func answerJSON(state, message string) string {
	b, err := json.Marshal(Answer{State: state, Message: message})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// fakeEndpoint is an enrollment endpoint that answers its replies in turn (the
// last one again once they run out) and records what it was asked.
type fakeEndpoint struct {
	t       *testing.T
	replies []canned
	// onAsk, if set, runs before the nth (1-based) ask is answered.
	onAsk func(n int)

	mu   sync.Mutex
	asks []*http.Request
	seen []Ask
}

func (e *fakeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var a Ask
	err := json.NewDecoder(r.Body).Decode(&a)
	e.mu.Lock()
	e.asks = append(e.asks, r)
	e.seen = append(e.seen, a)
	n := len(e.asks)
	e.mu.Unlock()
	assert.NoError(e.t, err, "the ask is JSON")
	if e.onAsk != nil {
		e.onAsk(n)
	}
	rep := e.replies[min(n, len(e.replies))-1]
	w.Header().Set("Content-Type", "application/json")
	if strings.HasPrefix(rep.body, "<") {
		w.Header().Set("Content-Type", "text/html")
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write([]byte(rep.body))
}

// count is how many asks arrived.
func (e *fakeEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.asks)
}

// serve starts e and returns a client of it.
func (e *fakeEndpoint) serve(t *testing.T) Client {
	t.Helper()
	e.t = t
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return Client{URL: srv.URL, Token: clientTestToken}
}

func TestClientAsk(t *testing.T) {
	const proxyPage = "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>nginx</body>\n</html>\n"
	for _, tc := range []struct {
		name    string
		canned  canned
		want    Answer
		wantErr []string
	}{
		{name: "pending", canned: canned{http.StatusAccepted, answerJSON(StatePending, "waiting for an operator")},
			want: Answer{State: StatePending, Message: "waiting for an operator"}},
		{name: "admitted", canned: canned{http.StatusOK, answerJSON(StateAdmitted, "in the mesh")},
			want: Answer{State: StateAdmitted, Message: "in the mesh"}},
		{name: "denied", canned: canned{http.StatusForbidden, answerJSON(StateDenied, "turned away")},
			want: Answer{State: StateDenied, Message: "turned away"}},
		{name: "bad token", canned: canned{http.StatusUnauthorized, answerJSON("", "enrollment token refused: check --enroll-token-file")},
			wantErr: []string{"401 Unauthorized", "enrollment token refused: check --enroll-token-file"}},
		{name: "bad ask", canned: canned{http.StatusBadRequest, answerJSON("", `machine "Edge 1" is not a name`)},
			wantErr: []string{"400 Bad Request", `machine "Edge 1" is not a name`}},
		{name: "name clash", canned: canned{http.StatusConflict, answerJSON("", "machine edge-1 is already in mesh.yaml with another host")},
			wantErr: []string{"409 Conflict", "already in mesh.yaml"}},
		{name: "too large", canned: canned{http.StatusRequestEntityTooLarge, answerJSON("", "ask over 64 KiB")},
			wantErr: []string{"413 Request Entity Too Large", "ask over 64 KiB"}},
		{name: "wrong method", canned: canned{http.StatusMethodNotAllowed, answerJSON("", "POST only")},
			wantErr: []string{"405 Method Not Allowed", "POST only"}},
		{name: "no Temporal", canned: canned{http.StatusServiceUnavailable, answerJSON("", "the worker cannot reach Temporal; the agent asks again")},
			wantErr: []string{"503 Service Unavailable", "cannot reach Temporal"}},
		{name: "a proxy's page", canned: canned{http.StatusBadGateway, proxyPage},
			wantErr: []string{"502 Bad Gateway", "not an enrollment answer", `"<html> <head><title>502 Bad Gateway`}},
		{name: "an empty error", canned: canned{http.StatusInternalServerError, ""},
			wantErr: []string{"500 Internal Server Error", "(empty body)"}},
		{name: "a 200 that is not an answer", canned: canned{http.StatusOK, "<html>welcome</html>"},
			wantErr: []string{"200 OK", "not an enrollment answer"}},
		{name: "a proxy's 403", canned: canned{http.StatusForbidden, "Forbidden"},
			wantErr: []string{"403 Forbidden", `not an enrollment answer: "Forbidden"`}},
		{name: "a state the status does not carry", canned: canned{http.StatusOK, answerJSON(StatePending, "odd")},
			wantErr: []string{"200 OK", "odd"}},
		{name: "an answer echoing the token", canned: canned{http.StatusUnauthorized, answerJSON("", "token "+clientTestToken+" refused")},
			wantErr: []string{"401 Unauthorized", "token [token] refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &fakeEndpoint{replies: []canned{tc.canned}}
			c := e.serve(t)
			got, err := c.Ask(context.Background(), clientTestAsk)

			require.Equal(t, 1, e.count())
			r := e.asks[0]
			assert.Equal(t, http.MethodPost, r.Method)
			assert.Equal(t, Path, r.URL.Path)
			assert.Equal(t, "Bearer "+clientTestToken, r.Header.Get("Authorization"))
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			assert.Equal(t, clientTestAsk, e.seen[0])

			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			require.Error(t, err)
			assert.Equal(t, Answer{}, got)
			assert.Contains(t, err.Error(), c.URL+Path, "the error names the URL")
			for _, w := range tc.wantErr {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), clientTestToken)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// A URL with a trailing slash or a path prefix gets Path appended once.
func TestClientAskURL(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(answerJSON(StatePending, "")))
	}))
	t.Cleanup(srv.Close)
	for base, want := range map[string]string{
		srv.URL:                 Path,
		srv.URL + "/":           Path,
		srv.URL + "/meshroll/":  "/meshroll" + Path,
		srv.URL + "/meshroll//": "/meshroll" + Path,
	} {
		_, err := Client{URL: base, Token: clientTestToken}.Ask(context.Background(), clientTestAsk)
		require.NoError(t, err, base)
		assert.Equal(t, want, got, base)
	}
}

func TestClientAskTransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	_, err = Client{URL: base, Token: clientTestToken}.Ask(context.Background(), clientTestAsk)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "enroll at "+base+Path+": ")
	var op *net.OpError
	assert.ErrorAs(t, err, &op, "the transport's error is wrapped")
	assert.NotContains(t, err.Error(), clientTestToken)
	assert.Equal(t, 1, strings.Count(err.Error(), base), "the URL once")
}

// However a Client is printed, its token does not show.
func TestClientHidesToken(t *testing.T) {
	c := Client{URL: "http://worker:8236", Token: clientTestToken}
	for _, s := range []string{
		fmt.Sprint(c), fmt.Sprintf("%v %+v %#v", c, c, c), fmt.Sprintf("%v", &c),
	} {
		assert.NotContains(t, s, clientTestToken)
	}
}

// clientLogLines decodes the JSON lines a zerolog logger wrote.
func clientLogLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.Lines(buf.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	return lines
}

func TestClientFollow(t *testing.T) {
	pending := canned{http.StatusAccepted, answerJSON(StatePending, "")}
	unavailable := canned{http.StatusServiceUnavailable, answerJSON("", "the worker cannot reach Temporal")}
	for _, tc := range []struct {
		name     string
		replies  []canned
		want     Answer
		wantAsks int
		// wantLogs are the levels and messages logged, in order.
		wantLogs [][2]string
	}{
		{
			name:     "pending until admitted",
			replies:  []canned{pending, pending, {http.StatusOK, answerJSON(StateAdmitted, "")}},
			want:     Answer{State: StateAdmitted},
			wantAsks: 3,
			wantLogs: [][2]string{
				{"info", "enrollment pending: an operator admits this machine with `starter machine approve edge-1`"},
				{"info", "enrollment admitted: this machine is in the mesh; the worker brings it its modules"},
			},
		},
		{
			name:     "pending in the fakeEndpoint's words",
			replies:  []canned{{http.StatusAccepted, answerJSON(StatePending, "asked; run starter machine approve edge-1")}, {http.StatusOK, answerJSON(StateAdmitted, "welcome")}},
			want:     Answer{State: StateAdmitted, Message: "welcome"},
			wantAsks: 2,
			wantLogs: [][2]string{
				{"info", "enrollment pending: asked; run starter machine approve edge-1"},
				{"info", "enrollment admitted: welcome"},
			},
		},
		{
			name:     "denied ends it",
			replies:  []canned{pending, {http.StatusForbidden, answerJSON(StateDenied, "")}, pending},
			want:     Answer{State: StateDenied},
			wantAsks: 2,
			wantLogs: [][2]string{
				{"info", "enrollment pending: an operator admits this machine with `starter machine approve edge-1`"},
				{"warn", "enrollment denied: an operator turned this machine away; nothing is pushed to it"},
			},
		},
		{
			name:     "errors are retried",
			replies:  []canned{unavailable, unavailable, unavailable, pending, {http.StatusOK, answerJSON(StateAdmitted, "")}},
			want:     Answer{State: StateAdmitted},
			wantAsks: 5,
			wantLogs: [][2]string{
				{"error", "enrollment failed; asking again"},
				{"info", "enrollment pending: an operator admits this machine with `starter machine approve edge-1`"},
				{"info", "enrollment admitted: this machine is in the mesh; the worker brings it its modules"},
			},
		},
		{
			name:     "a new error is logged, the same one not",
			replies:  []canned{pending, unavailable, unavailable, {http.StatusUnauthorized, answerJSON("", "bad token")}, pending, pending, {http.StatusOK, answerJSON(StateAdmitted, "")}},
			want:     Answer{State: StateAdmitted},
			wantAsks: 7,
			wantLogs: [][2]string{
				{"info", "enrollment pending: an operator admits this machine with `starter machine approve edge-1`"},
				{"error", "enrollment failed; asking again"},
				{"error", "enrollment failed; asking again"},
				{"info", "enrollment pending: an operator admits this machine with `starter machine approve edge-1`"},
				{"info", "enrollment admitted: this machine is in the mesh; the worker brings it its modules"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &fakeEndpoint{replies: tc.replies}
			c := e.serve(t)
			var buf bytes.Buffer
			got, err := c.Follow(context.Background(), clientTestAsk, time.Millisecond, zerolog.New(&buf))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantAsks, e.count(), "asks")

			lines := clientLogLines(t, &buf)
			var logged [][2]string
			for _, l := range lines {
				logged = append(logged, [2]string{l["level"].(string), l["message"].(string)})
				assert.Equal(t, "edge-1", l["machine"])
				assert.Equal(t, c.URL+Path, l["url"])
				if l["level"] == "error" {
					assert.Contains(t, l["error"], "enroll at "+c.URL+Path+": ")
				} else {
					assert.NotEmpty(t, l["state"])
				}
			}
			var errs []string
			for _, l := range lines {
				if l["level"] == "error" {
					errs = append(errs, l["error"].(string))
				}
			}
			if tc.name == "a new error is logged, the same one not" {
				require.Len(t, errs, 2)
				assert.Contains(t, errs[0], "503 Service Unavailable: the worker cannot reach Temporal")
				assert.Contains(t, errs[1], "401 Unauthorized: bad token")
			}
			assert.Equal(t, tc.wantLogs, logged)
			assert.NotContains(t, buf.String(), clientTestToken)
		})
	}
}

// Follow returns ctx's error once ctx ends, whether it is waiting out a
// pending answer or an error.
func TestClientFollowCancelled(t *testing.T) {
	for name, r := range map[string]canned{
		"pending": {http.StatusAccepted, answerJSON(StatePending, "")},
		"failing": {http.StatusServiceUnavailable, answerJSON("", "no Temporal")},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e := &fakeEndpoint{replies: []canned{r}, onAsk: func(n int) {
				if n == 2 {
					cancel()
				}
			}}
			c := e.serve(t)
			got, err := c.Follow(ctx, clientTestAsk, time.Millisecond, zerolog.Nop())
			assert.True(t, errors.Is(err, context.Canceled), "%v", err)
			assert.Equal(t, Answer{}, got)
			assert.Equal(t, 2, e.count())
		})
	}
}
