package agent

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/liveness"
	"github.com/meshroll/meshroll/internal/mesh"
)

// fuzzMethods are the methods FuzzHostAPI picks from (by index): the API's
// own, the others a client could send, and a made-up one.
var fuzzMethods = []string{
	http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch,
	http.MethodHead, http.MethodOptions, "PURGE",
}

// FuzzHostAPI throws whole requests (method, path with query, the
// Authorization header, Content-Type, body) at the agent's HTTP handler, as
// the host binary serves it with a token. Whatever arrives:
//
//   - it never panics and never answers 5xx (every input here is the
//     client's mistake, and a 500 tells the worker to retry);
//
//   - without the right bearer token nothing but the health check, the
//     probes and the metrics (GET, read-only) answers
//     200, and a POST to the declarations path is always 401;
//
//   - a request that is not answered 200 changes nothing the agent reports
//     (sequence, request, containers, floor), and an unauthorised one does
//     not even reach the journal.
//
//     go test -run '^$' -fuzz FuzzHostAPI -fuzztime 30s ./internal/agent
func FuzzHostAPI(f *testing.F) {
	const token = "fuzz-t0ken"
	digest := "sha256:" + strings.Repeat("cd", 32)
	good := `{"machine":"m1","seq":1,"plan":"plan/host/x","request":"r","containers":[{"module":"host","digest":"` + digest + `","generation":3}]}`
	seeds := []struct {
		method      uint8
		target      string
		auth, ctype string
		body        string
	}{
		{1, host.PathDeclarations, "Bearer " + token, "application/json", good},
		{1, host.PathDeclarations, "", "application/json", good},
		{1, host.PathDeclarations, "Bearer wrong", "application/json", good},
		{1, host.PathDeclarations, "bearer " + token, "application/json", good},
		{1, host.PathDeclarations, "Bearer " + token + " ", "application/json", good},
		{1, host.PathDeclarations, token, "text/plain", good},
		{1, host.PathDeclarations + "?seq=9", "Bearer " + token, "", `{"machine":"m1","seq":2,"containers":[{"module":"a/b","digest":"sha256:abc","generation":1}]}`},
		{1, "/v1//declarations", "", "", good},
		{1, "/v1/declarations/", "", "", good},
		{1, "/V1/DECLARATIONS", "", "", good},
		{2, host.PathDeclarations, "Bearer " + token, "", good},
		{0, host.PathReport, "Bearer " + token, "", ""},
		{0, host.PathReport, "", "", ""},
		{0, host.PathReport + "?after=1&wait=1s", "Bearer " + token, "", ""},
		{0, host.PathReport + "?wait=60s", "Bearer " + token, "", ""},
		{0, host.PathReport + "?after=18446744073709551615&wait=-1ns", "Bearer " + token, "", ""},
		{0, host.PathReport + "?after=1&after=1&wait=1h", "", "", ""},
		{1, host.PathDeclarations, "Bearer " + token, "application/json", `{"machine":"m1","seq":2,"plan":"p","request":"r","containers":[{"module":"host","digest":"` + digest + `","generation":3,` +
			`"health":{"http":{"path":"/healthz"},"interval_ms":100,"min_healthy_ms":1000}}]}`},
		{1, host.PathDeclarations, "Bearer " + token, "application/json", `{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":3,` +
			`"health":{"tcp":{"port":70000}},"health_since":"x","restarts":1}]}`},
		{0, host.PathJournal + "?before=1&limit=2", "Bearer " + token, "", ""},
		{0, host.PathJournal + "?limit=99999999999999999999", "Bearer " + token, "", ""},
		{0, host.PathJournal + "?before=-1&before=2", "Bearer " + token, "", ""},
		{1, host.PathJournal, "Bearer " + token, "", good},
		{3, host.PathJournal, "", "", ""},
		{0, host.PathHealthz, "", "", ""},
		{0, liveness.PathLive, "", "", ""},
		{0, liveness.PathReady, "", "", ""},
		{0, PathMetrics, "", "", ""},
		{1, PathMetrics, "", "", "x"},
		{5, host.PathHealthz, "", "", ""},
		{6, "/", "", "", ""},
		{7, "/v1/../v1/declarations", "", "", good},
		{1, host.PathDeclarations, "Bearer " + token, "application/json", good + good},
		{1, host.PathDeclarations, "Bearer " + token, "application/json", `{"machine":"m1","seq":1,"containers":[],"extra":1}`},
		{1, host.PathDeclarations, "Bearer " + token, "application/json", "\x00\xff{"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.auth, s.ctype, []byte(s.body))
	}

	// A clock that never moves: no probe runs and no min_healthy passes
	// behind the fuzzer's back, so the floor moves only by its doing.
	a, err := Open(context.Background(), Options{Machine: "m1", StateDir: f.TempDir(), Runtime: NewNoopRuntime(0), Log: zerolog.Nop(), clock: newFakeClock()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = a.Close(context.Background()) })
	h := NewHandler(a, token)

	f.Fuzz(func(t *testing.T, method uint8, target, auth, ctype string, body []byte) {
		u, err := url.ParseRequestURI(target)
		if err != nil || u.Host != "" || u.Scheme != "" {
			return // not a request line a server can receive
		}
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		req := &http.Request{
			Method: m, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "agent.test", RemoteAddr: "192.0.2.1:1234",
			Body: nopCloser{bytes.NewReader(body)}, ContentLength: int64(len(body)),
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		authorised := auth == "Bearer "+token

		before := snapshot(t, a)
		rec := httptest.NewRecorder()
		// A long poll on the current revision ends with the context, as
		// when its client leaves.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		h.ServeHTTP(rec, req.WithContext(ctx))
		cancel()
		after := snapshot(t, a)

		if rec.Code >= 500 {
			t.Fatalf("%s %q: status %d for a client's input: %s", m, target, rec.Code, rec.Body)
		}
		if !authorised {
			if rec.Code == http.StatusOK && !openPath(m, u.Path) {
				t.Fatalf("%s %q without the token (Authorization %q): answered 200: %s", m, target, auth, rec.Body)
			}
			if m == http.MethodPost && u.Path == host.PathDeclarations && rec.Code != http.StatusUnauthorized {
				t.Fatalf("POST %q without the token (Authorization %q): status %d, want 401: %s", target, auth, rec.Code, rec.Body)
			}
			if after.journal != before.journal {
				t.Fatalf("%s %q without the token: the journal grew from %d to %d entries", m, target, before.journal, after.journal)
			}
		}
		if rec.Code != http.StatusOK && !reflect.DeepEqual(before.ledger, after.ledger) {
			t.Fatalf("%s %q answered %d but changed the agent:\nbefore %+v\nafter  %+v", m, target, rec.Code, before.ledger, after.ledger)
		}
	})
}

// openPath says whether method and path are among those the agent answers
// without a token: the health check, the probes and the metrics, all
// read-only.
func openPath(method, path string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	switch path {
	case host.PathHealthz, liveness.PathLive, liveness.PathReady, PathMetrics:
		return true
	}
	return false
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// agentState is what a rejected request must leave alone.
type agentState struct {
	ledger struct {
		seq        uint64
		request    string
		containers []string
		floor      map[string]int64
	}
	journal int
}

// snapshot waits until no container is starting (an accepted declaration's
// containers reach running on their own, journalling it and raising the
// floor, and that must not be taken for the next request's doing), then
// reads what a rejected request must leave alone.
func snapshot(t *testing.T, a *Agent) agentState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.mu.Lock()
		starting := slices.ContainsFunc(a.containers, func(rc mesh.RunningContainer) bool { return rc.State == mesh.StateStarting })
		a.mu.Unlock()
		if !starting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("containers still starting after 10s on the noop runtime")
		}
		runtime.Gosched()
	}
	rep, err := a.Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var s agentState
	s.ledger.seq, s.ledger.request = rep.LastSeq, rep.LastRequest
	for _, c := range rep.Containers {
		s.ledger.containers = append(s.ledger.containers, c.Module+"="+c.Digest)
	}
	a.mu.Lock()
	s.ledger.floor = map[string]int64{}
	for m, f := range a.ledger.Floor {
		s.ledger.floor[m] = f.Generation
	}
	s.journal = len(a.journal.offs)
	a.mu.Unlock()
	return s
}

// The fuzz target's seeds run as a plain test too; these are the cases the
// brief names, each with its expected status, so that a regression shows
// without fuzzing.
func TestHostAPIHostileRequests(t *testing.T) {
	const token = "t0ken"
	a, err := Open(context.Background(), Options{Machine: "m1", StateDir: t.TempDir(), Runtime: NewNoopRuntime(0), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	h := NewHandler(a, token)
	good := mesh.Container{Module: "host", Digest: "sha256:" + strings.Repeat("ab", 32), Generation: 1}
	body := func(c mesh.Container) string {
		return `{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[{"module":"` + c.Module + `","digest":"` + c.Digest + `","generation":1}]}`
	}
	cases := []struct {
		name, method, path, auth, body string
		status                         int
		want                           string // in the answer
	}{
		{"no token", "POST", host.PathDeclarations, "", body(good), 401, "unauthorized"},
		{"wrong token", "POST", host.PathDeclarations, "Bearer x", body(good), 401, "unauthorized"},
		{"journal without token", "GET", host.PathJournal, "", "", 401, "unauthorized"},
		{"digest too short", "POST", host.PathDeclarations, "Bearer " + token, body(mesh.Container{Module: "host", Digest: "sha256:abc"}), 400, `sha256:abc`},
		{"digest too long", "POST", host.PathDeclarations, "Bearer " + token, body(mesh.Container{Module: "host", Digest: good.Digest + "00"}), 400, good.Digest + "00"},
		{"digest uppercase", "POST", host.PathDeclarations, "Bearer " + token, body(mesh.Container{Module: "host", Digest: strings.ToUpper(good.Digest)}), 400, "unpinned"},
		{"module with slash", "POST", host.PathDeclarations, "Bearer " + token, body(mesh.Container{Module: "a/b", Digest: good.Digest}), 400, `a/b`},
		{"module with dot-dot", "POST", host.PathDeclarations, "Bearer " + token, body(mesh.Container{Module: "../etc", Digest: good.Digest}), 400, `../etc`},
		{"unknown field", "POST", host.PathDeclarations, "Bearer " + token, `{"machine":"m1","seq":1,"containers":[],"colour":"red"}`, 400, `colour`},
		{"huge body", "POST", host.PathDeclarations, "Bearer " + token, `{"machine":"` + strings.Repeat("m", host.MaxBodyBytes+10) + `"}`, 413, "body exceeds"},
		{"wrong method", "DELETE", host.PathDeclarations, "Bearer " + token, "", 405, ""},
		{"long poll without token", "GET", host.PathReport + "?after=1&wait=1s", "", "", 401, "unauthorized"},
		{"long poll with a bad wait", "GET", host.PathReport + "?wait=forever", "Bearer " + token, "", 400, "wait="},
		{"two probes", "POST", host.PathDeclarations, "Bearer " + token,
			`{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[{"module":"host","digest":"` + good.Digest + `","generation":1,"health":{"http":{},"tcp":{}}}]}`, 400, "2 probes declared"},
		{"report field in a declaration", "POST", host.PathDeclarations, "Bearer " + token,
			`{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[{"module":"host","digest":"` + good.Digest + `","generation":1,"healthy_since":"x"}]}`, 400, "healthy_since"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, a)
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("status %d, want %d with %q in: %s", rec.Code, tc.status, tc.want, rec.Body)
			}
			after := snapshot(t, a)
			if !reflect.DeepEqual(before.ledger, after.ledger) {
				t.Fatalf("a rejected request changed the agent: %+v -> %+v", before.ledger, after.ledger)
			}
			if tc.status == 401 && after.journal != before.journal {
				t.Fatalf("an unauthorised request reached the journal")
			}
		})
	}
}
