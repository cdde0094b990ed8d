package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Providers the receiver serves, each at /v1/webhooks/<provider>.
const (
	GitHub = "github"
	GitLab = "gitlab"
	Gitea  = "gitea"
)

// provider is what differs between git hosts: how a delivery proves it
// knows the secret, which header names its event and its ID, and how a
// push event is written.
type provider struct {
	// verify reports whether the request carries a valid proof of key
	// over body, and what is wrong when it does not.
	verify func(h http.Header, body, key []byte) error
	// event is the delivery's event type, "" when the header is missing;
	// push is the value of a push event, ping of a hook's test ("" if
	// the host sends none).
	event      func(h http.Header) string
	push, ping string
	// delivery is the git host's ID of the delivery, "" when it sends none.
	delivery func(h http.Header) string
	// parse reads a push event.
	parse func(body []byte) (push, error)
}

var providers = map[string]provider{
	GitHub: {
		verify: func(h http.Header, body, key []byte) error {
			sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
			if h.Get("X-Hub-Signature-256") == "" {
				return errors.New("no X-Hub-Signature-256 header; set the webhook's secret on the git host")
			}
			if !ok {
				return errors.New("X-Hub-Signature-256 is not sha256=<hex>")
			}
			return checkHMAC(sig, body, key, "X-Hub-Signature-256")
		},
		event:    header("X-GitHub-Event"),
		push:     "push",
		ping:     "ping",
		delivery: header("X-GitHub-Delivery"),
		parse:    parseHubPush,
	},
	GitLab: {
		verify: func(h http.Header, _, key []byte) error {
			tok := h.Get("X-Gitlab-Token")
			if tok == "" {
				return errors.New("no X-Gitlab-Token header; set the webhook's secret token on the git host")
			}
			// Compared as digests, so that the comparison's time does not
			// depend on the lengths either.
			a, b := sha256.Sum256([]byte(tok)), sha256.Sum256(key)
			if !hmac.Equal(a[:], b[:]) {
				return errors.New("X-Gitlab-Token does not match the secret")
			}
			return nil
		},
		event:    header("X-Gitlab-Event"),
		push:     "Push Hook",
		delivery: header("X-Gitlab-Event-UUID"),
		parse:    parseLabPush,
	},
	Gitea: {
		verify: func(h http.Header, body, key []byte) error {
			// Forgejo sends both headers, Gitea the first: either will do.
			var errs []error
			for _, name := range []string{"X-Gitea-Signature", "X-Forgejo-Signature"} {
				if sig := h.Get(name); sig != "" {
					err := checkHMAC(sig, body, key, name)
					if err == nil {
						return nil
					}
					errs = append(errs, err)
				}
			}
			if len(errs) == 0 {
				return errors.New("no X-Gitea-Signature or X-Forgejo-Signature header; set the webhook's secret on the git host")
			}
			return errs[0]
		},
		event: func(h http.Header) string {
			return firstHeader(h, "X-Gitea-Event", "X-Forgejo-Event")
		},
		push: "push",
		delivery: func(h http.Header) string {
			return firstHeader(h, "X-Gitea-Delivery", "X-Forgejo-Delivery")
		},
		parse: parseHubPush,
	},
}

func header(name string) func(http.Header) string {
	return func(h http.Header) string { return h.Get(name) }
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// Sign is the hex HMAC-SHA256 of body under key: what GitHub sends after
// "sha256=" in X-Hub-Signature-256 and Gitea in X-Gitea-Signature.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// checkHMAC compares the hex signature sig with body's under key in
// constant time.
func checkHMAC(sig string, body, key []byte, name string) error {
	got, err := hex.DecodeString(strings.TrimSpace(sig))
	if err != nil {
		return fmt.Errorf("%s is not hex", name)
	}
	want, _ := hex.DecodeString(Sign(key, body))
	if !hmac.Equal(got, want) {
		return fmt.Errorf("%s does not match the body signed with the secret", name)
	}
	return nil
}

// push is a push event, whichever host wrote it.
type push struct {
	// Ref is the pushed ref (refs/heads/main); Before and After its heads
	// before and after the push.
	Ref, Before, After string
	// Repository is the repository's name for messages; Names every name
	// the event gives it (URLs and owner/name), for matching modules.
	Repository string
	Names      []string
}

// zeroCommit is how git hosts write "no commit": the head before a
// branch was created, or after it was deleted.
func zeroCommit(s string) bool { return strings.Trim(s, "0") == "" }

// hubPush is a push event as GitHub and Gitea/Forgejo write it.
type hubPush struct {
	Ref        string `json:"ref"`
	Before     string `json:"before"`
	After      string `json:"after"`
	Repository struct {
		FullName string `json:"full_name"`
		CloneURL string `json:"clone_url"`
		HTMLURL  string `json:"html_url"`
		SSHURL   string `json:"ssh_url"`
	} `json:"repository"`
}

func parseHubPush(body []byte) (push, error) {
	var e hubPush
	if err := json.Unmarshal(body, &e); err != nil {
		return push{}, fmt.Errorf("not a push event: %w", err)
	}
	r := e.Repository
	return checked(push{Ref: e.Ref, Before: e.Before, After: e.After,
		Repository: firstOf(r.FullName, r.CloneURL, r.HTMLURL), Names: []string{r.CloneURL, r.HTMLURL, r.SSHURL, r.FullName}})
}

// labPush is a push event as GitLab writes it.
type labPush struct {
	Ref         string  `json:"ref"`
	Before      string  `json:"before"`
	After       string  `json:"after"`
	CheckoutSHA *string `json:"checkout_sha"`
	Project     struct {
		PathWithNamespace string `json:"path_with_namespace"`
		GitHTTPURL        string `json:"git_http_url"`
		GitSSHURL         string `json:"git_ssh_url"`
		WebURL            string `json:"web_url"`
	} `json:"project"`
}

func parseLabPush(body []byte) (push, error) {
	var e labPush
	if err := json.Unmarshal(body, &e); err != nil {
		return push{}, fmt.Errorf("not a push event: %w", err)
	}
	after := e.After
	if e.CheckoutSHA != nil && *e.CheckoutSHA != "" {
		after = *e.CheckoutSHA
	}
	p := e.Project
	return checked(push{Ref: e.Ref, Before: e.Before, After: after,
		Repository: firstOf(p.PathWithNamespace, p.GitHTTPURL, p.WebURL), Names: []string{p.GitHTTPURL, p.GitSSHURL, p.WebURL, p.PathWithNamespace}})
}

// checked refuses a push that lacks what a plan needs: a ref, a head that
// is a full commit ID (or the zero commit of a deletion), a repository.
func checked(p push) (push, error) {
	switch {
	case p.Ref == "":
		return push{}, errors.New("the push event has no ref")
	case p.After == "":
		return push{}, errors.New("the push event has no head (after)")
	case p.Repository == "":
		return push{}, errors.New("the push event names no repository")
	case !zeroCommit(p.After) && mesh.ValidCommit(p.After) != nil:
		return push{}, fmt.Errorf("the push event's head %q is not a full commit ID", p.After)
	case p.Before != "" && !zeroCommit(p.Before) && mesh.ValidCommit(p.Before) != nil:
		return push{}, fmt.Errorf("the push event's head before the push %q is not a full commit ID", p.Before)
	}
	if zeroCommit(p.Before) {
		p.Before = ""
	}
	return p, nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
