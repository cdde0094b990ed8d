package webhook

import (
	"net/http"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	body := []byte(`{"ref":"refs/heads/main"}`)
	good := Sign([]byte(testKey), body)
	bad := Sign([]byte("not-the-key"), body)
	for _, tc := range []struct {
		provider string
		headers  map[string]string
		err      string
	}{
		{GitHub, map[string]string{"X-Hub-Signature-256": "sha256=" + good}, ""},
		{GitHub, map[string]string{"X-Hub-Signature-256": "sha256=" + strings.ToUpper(good)}, ""},
		{GitHub, map[string]string{"X-Hub-Signature-256": "sha256=" + bad}, "does not match"},
		{GitHub, map[string]string{"X-Hub-Signature-256": good}, "is not sha256=<hex>"},
		{GitHub, map[string]string{"X-Hub-Signature-256": "sha256=zz"}, "is not hex"},
		{GitHub, map[string]string{"X-Hub-Signature": "sha1=00"}, "no X-Hub-Signature-256 header"},
		{GitLab, map[string]string{"X-Gitlab-Token": testKey}, ""},
		{GitLab, map[string]string{"X-Gitlab-Token": testKey + "x"}, "does not match"},
		{GitLab, nil, "no X-Gitlab-Token header"},
		{Gitea, map[string]string{"X-Gitea-Signature": good}, ""},
		{Gitea, map[string]string{"X-Forgejo-Signature": good}, ""},
		{Gitea, map[string]string{"X-Gitea-Signature": bad, "X-Forgejo-Signature": good}, ""},
		{Gitea, map[string]string{"X-Gitea-Signature": bad}, "X-Gitea-Signature does not match"},
		{Gitea, nil, "no X-Gitea-Signature or X-Forgejo-Signature header"},
	} {
		h := http.Header{}
		for k, v := range tc.headers {
			h.Set(k, v)
		}
		err := providers[tc.provider].verify(h, body, []byte(testKey))
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s %v: got %v, want %q", tc.provider, tc.headers, err, tc.err)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, provider, body string
		want                 push
		err                  string
	}{
		{name: "github", provider: GitHub, body: hubBody("refs/heads/main", "https://github.com/acme/mesh.git", after),
			want: push{Ref: "refs/heads/main", Before: before, After: after, Repository: "acme/mesh",
				Names: []string{"https://github.com/acme/mesh.git", "https://github.com/acme/mesh", "", "acme/mesh"}}},
		{name: "new branch", provider: Gitea, body: strings.Replace(hubBody("refs/heads/x", "https://git.example/acme/mesh", after), before, zeros, 1),
			want: push{Ref: "refs/heads/x", After: after, Repository: "acme/mesh",
				Names: []string{"https://git.example/acme/mesh", "https://github.com/acme/mesh", "", "acme/mesh"}}},
		{name: "gitlab takes checkout_sha", provider: GitLab, body: strings.Replace(labBody("refs/heads/main"), `"after":"`+after, `"after":"`+before, 1),
			want: push{Ref: "refs/heads/main", Before: before, After: after, Repository: "acme/docs",
				Names: []string{"https://gitlab.example.com/acme/docs.git", "", "", "acme/docs"}}},
		{name: "not json", provider: GitLab, body: "ref=main", err: "not a push event"},
		{name: "no ref", provider: GitHub, body: `{"after":"` + after + `","repository":{"full_name":"a/b"}}`, err: "has no ref"},
		{name: "no head", provider: GitHub, body: `{"ref":"refs/heads/main","repository":{"full_name":"a/b"}}`, err: "has no head"},
		{name: "no repository", provider: GitHub, body: `{"ref":"refs/heads/main","after":"` + after + `"}`, err: "names no repository"},
		{name: "short head", provider: GitHub, body: hubBody("refs/heads/main", "x", "abc123"), err: `head "abc123" is not a full commit ID`},
		{name: "bad before", provider: GitHub, body: strings.Replace(hubBody("refs/heads/main", "x", after), before, "HEAD~1", 1), err: `before the push "HEAD~1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := providers[tc.provider].parse([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.Ref != tc.want.Ref || got.Before != tc.want.Before || got.After != tc.want.After ||
				got.Repository != tc.want.Repository || strings.Join(got.Names, "|") != strings.Join(tc.want.Names, "|") {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestNormaliseAndMatch(t *testing.T) {
	for in, want := range map[string]string{
		"https://GitHub.com/acme/mesh.git/":    "github.com/acme/mesh",
		"git@github.com:acme/mesh.git":         "github.com/acme/mesh",
		"ssh://git@github.com:22/acme/mesh":    "github.com/acme/mesh",
		"http://user:pw@git.example:3000/a/b/": "git.example/a/b",
		"file:///srv/repos/mesh.git":           "/srv/repos/mesh",
		"/srv/repos/mesh.git/":                 "/srv/repos/mesh",
		"":                                     "",
	} {
		if got := normalise(in); got != want {
			t.Errorf("normalise(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct {
		names            []string
		branch           string
		modules, already string
	}{
		{[]string{"git@github.com:acme/mesh.git"}, "main", "host,api", ""},
		{[]string{"ACME/Mesh"}, "main", "host,api", ""},
		{[]string{"/srv/mesh.git"}, "main", "host", ""},
		{[]string{"acme/docs"}, "main", "", "release"},
		{[]string{"https://github.com/acme/other", "acme/other"}, "main", "", ""},
		{[]string{"mesh"}, "main", "", ""},
	} {
		mods, branches := match(testRoutes, push{Names: tc.names}, tc.branch)
		if strings.Join(mods, ",") != tc.modules || strings.Join(branches, ",") != tc.already {
			t.Errorf("match(%v, %s) = %v, %v; want %s and branches %s", tc.names, tc.branch, mods, branches, tc.modules, tc.already)
		}
	}
}
