package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/meshapi"
)

const (
	testKey = "hook-s3cret"
	before  = "1111111111111111111111111111111111111111"
	after   = "2222222222222222222222222222222222222222"
	zeros   = "0000000000000000000000000000000000000000"
)

// fakeStarter records what the handler asked to start.
type fakeStarter struct {
	started []meshapi.ReceiveInput
	seen    map[string]bool
	err     error
}

func (f *fakeStarter) Receive(_ context.Context, in meshapi.ReceiveInput) (Received, error) {
	if f.err != nil {
		return Received{}, f.err
	}
	id := meshapi.ReceiveID(in.Provider, in.Delivery)
	if f.seen[id] {
		return Received{ID: id, Existing: true}, nil
	}
	f.seen[id] = true
	f.started = append(f.started, in)
	return Received{ID: id}, nil
}

var testRoutes = []Route{
	{Module: "host", Branch: "main", Names: []string{"github.com/acme/mesh", "/srv/mesh"}},
	{Module: "api", Branch: "main", Names: []string{"github.com/acme/mesh"}},
	{Module: "docs", Branch: "release", Names: []string{"gitlab.example.com/acme/docs"}},
}

func hubBody(ref, repo, after string) string {
	return `{"ref":"` + ref + `","before":"` + before + `","after":"` + after +
		`","repository":{"full_name":"acme/mesh","clone_url":"` + repo + `","html_url":"https://github.com/acme/mesh"}}`
}

func labBody(ref string) string {
	return `{"object_kind":"push","ref":"` + ref + `","before":"` + before + `","after":"` + after + `","checkout_sha":"` + after +
		`","project":{"path_with_namespace":"acme/docs","git_http_url":"https://gitlab.example.com/acme/docs.git"}}`
}

// request builds a delivery to provider with a valid proof of testKey
// unless sign is false.
type request struct {
	method, path, body string
	headers            map[string]string
}

func github(event, body string) request {
	return request{http.MethodPost, PathPrefix + GitHub, body, map[string]string{
		"X-GitHub-Event": event, "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": "sha256=" + Sign([]byte(testKey), []byte(body)),
	}}
}

func (r request) with(k, v string) request {
	h := map[string]string{}
	for a, b := range r.headers {
		h[a] = b
	}
	h[k] = v
	r.headers = h
	return r
}

func TestHandler(t *testing.T) {
	push := hubBody("refs/heads/main", "https://github.com/acme/mesh.git", after)
	for _, tc := range []struct {
		name    string
		req     request
		status  int
		line    string
		modules []string
	}{
		{name: "github push", req: github("push", push), status: 202,
			line: "accepted: push of 222222222222 to main of acme/mesh (modules host, api); workflow receive/github/d-1", modules: []string{"host", "api"}},
		{name: "github push of a local repository", req: github("push", `{"ref":"refs/heads/main","after":"`+after+`","repository":{"full_name":"mesh","clone_url":"file:///srv/mesh/.git"}}`),
			status: 202, modules: []string{"host"}},
		{name: "ping", req: github("ping", `{"zen":"hi"}`), status: 200, line: "pong"},
		{name: "gitlab push", req: request{http.MethodPost, PathPrefix + GitLab, labBody("refs/heads/release"), map[string]string{
			"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": testKey, "X-Gitlab-Event-UUID": "u-1"}}, status: 202, modules: []string{"docs"}},
		{name: "forgejo push, signed in its own header", req: request{http.MethodPost, PathPrefix + Gitea, push, map[string]string{
			"X-Forgejo-Event": "push", "X-Forgejo-Signature": Sign([]byte(testKey), []byte(push))}}, status: 202, modules: []string{"host", "api"}},
		{name: "gitea push", req: request{http.MethodPost, PathPrefix + Gitea, push, map[string]string{
			"X-Gitea-Event": "push", "X-Gitea-Delivery": "g-1", "X-Gitea-Signature": Sign([]byte(testKey), []byte(push))}}, status: 202, modules: []string{"host", "api"}},

		{name: "wrong method", req: request{method: http.MethodGet, path: PathPrefix + GitHub}, status: 405, line: "GET is not allowed"},
		{name: "unknown provider", req: github("push", push).withPath(PathPrefix + "bitbucket"), status: 404, line: "no receiver at /v1/webhooks/bitbucket"},
		{name: "body over the cap", req: github("push", push+strings.Repeat(" ", 2048)), status: 413, line: "over the receiver's cap of 2048 bytes"},
		{name: "no signature", req: github("push", push).with("X-Hub-Signature-256", ""), status: 401, line: "refused: no X-Hub-Signature-256 header"},
		{name: "bad signature", req: github("push", push).with("X-Hub-Signature-256", "sha256="+Sign([]byte("other"), []byte(push))), status: 401,
			line: "refused: X-Hub-Signature-256 does not match"},
		{name: "signature of another body", req: github("push", push).withBody(hubBody("refs/heads/main", "https://github.com/acme/mesh.git", before)), status: 401},
		{name: "wrong gitlab token", req: request{http.MethodPost, PathPrefix + GitLab, labBody("refs/heads/release"), map[string]string{
			"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "guess"}}, status: 401, line: "refused: X-Gitlab-Token does not match the secret"},
		{name: "gitea without signature", req: request{http.MethodPost, PathPrefix + Gitea, push, map[string]string{"X-Gitea-Event": "push"}}, status: 401},
		{name: "no event header", req: github("", push), status: 400, line: "no event type header"},
		{name: "another event", req: github("issues", `{}`), status: 202, line: `ignored: "issues" is not a push event`},
		{name: "malformed payload", req: github("push", `{"ref":`), status: 400, line: "malformed push event: not a push event"},
		{name: "head not a commit", req: github("push", hubBody("refs/heads/main", "https://github.com/acme/mesh", "HEAD")), status: 400,
			line: `malformed push event: the push event's head "HEAD" is not a full commit ID`},
		{name: "unknown repository", req: github("push", strings.ReplaceAll(hubBody("refs/heads/main", "https://github.com/other/app", after), "acme/mesh", "other/app")),
			status: 422, line: "unknown repository other/app: no module's repo or source names it"},
		{name: "branch nobody deploys", req: github("push", hubBody("refs/heads/feature", "https://github.com/acme/mesh", after)), status: 202,
			line: "ignored: no module deploys branch feature of acme/mesh (they deploy main)"},
		{name: "a tag", req: github("push", hubBody("refs/tags/v1", "https://github.com/acme/mesh", after)), status: 202, line: "ignored: refs/tags/v1 is not a branch"},
		{name: "branch deleted", req: github("push", hubBody("refs/heads/main", "https://github.com/acme/mesh", zeros)), status: 202, line: "ignored: branch main of acme/mesh was deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeStarter{seen: map[string]bool{}}
			h, err := New(Options{Secret: testKey, MaxBody: 2048, Routes: testRoutes, Starter: f, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			rec := serveOnce(h, tc.req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.line) || strings.Count(rec.Body.String(), "\n") != 1 {
				t.Fatalf("got %d %q, want %d and one line with %q", rec.Code, rec.Body.String(), tc.status, tc.line)
			}
			if strings.Contains(rec.Body.String(), testKey) {
				t.Fatalf("the answer shows the secret: %q", rec.Body.String())
			}
			if tc.modules == nil {
				if len(f.started) != 0 {
					t.Fatalf("started %+v; want nothing", f.started)
				}
				return
			}
			if len(f.started) != 1 || strings.Join(f.started[0].Modules, ",") != strings.Join(tc.modules, ",") || f.started[0].After != after {
				t.Fatalf("started %+v; want one delivery at %s for %v", f.started, after, tc.modules)
			}
			// The same delivery again is found, not started again.
			again := serveOnce(h, tc.req)
			if again.Code != http.StatusOK || !strings.HasPrefix(again.Body.String(), "already received: ") || len(f.started) != 1 {
				t.Fatalf("re-delivery: %d %q, %d started; want 200 already received and still one", again.Code, again.Body.String(), len(f.started))
			}
		})
	}
}

// A delivery without an ID is named by its body, so a re-delivery of it
// finds the first; Temporal away is 503, to be redelivered.
func TestHandlerDeliveryByBodyAndStarterDown(t *testing.T) {
	push := hubBody("refs/heads/main", "https://github.com/acme/mesh.git", after)
	f := &fakeStarter{seen: map[string]bool{}}
	h, err := New(Options{Secret: testKey, MaxBody: 1 << 20, Routes: testRoutes, Starter: f, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	req := github("push", push).with("X-GitHub-Delivery", "")
	serveOnce(h, req)
	if rec := serveOnce(h, req); rec.Code != http.StatusOK || len(f.started) != 1 || len(f.started[0].Delivery) != 64 {
		t.Fatalf("got %d, started %+v; want one start named by the body's digest", rec.Code, f.started)
	}
	f.err = errors.New("connection refused")
	if rec := serveOnce(h, req.with("X-GitHub-Delivery", "d-2")); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("with Temporal away got %d %q, want 503", rec.Code, rec.Body.String())
	}
}

func (r request) withPath(p string) request { r.path = p; return r }
func (r request) withBody(b string) request { r.body = b; return r }

func serveOnce(h http.Handler, r request) *httptest.ResponseRecorder {
	req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	for k, v := range r.headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
