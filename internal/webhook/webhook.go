// Package webhook is the merge receiver: the worker's HTTP endpoint that
// takes push events from the git host (GitHub, GitLab, Gitea and Forgejo,
// at /v1/webhooks/<provider>) so that a merge starts its plans without a
// CI job running starter merge.
//
// The handler checks the delivery (method, size, the provider's signature
// or token under the shared secret, the event type, the payload), matches
// the pushed repository and branch to the modules that deploy them
// (Routes), and starts one Receive workflow for the delivery, named by the
// delivery's ID, through a Starter. It fetches nothing and starts no plan
// itself: the workflow's activity does, durably, so a clone that cannot be
// fetched now is retried by Temporal rather than lost with the request,
// and a re-delivered event finds the workflow, and its plans, the first
// delivery started.
//
// Every answer is one line of plain text saying why, with a status the git
// host's delivery log shows: 202 accepted (or ignored: a branch or event
// nobody deploys from is the normal case of a hook that sees every push,
// and must not paint the log red), 200 already received or pong, 401 a bad
// or missing signature, 400 a malformed payload or no event header, 405 a
// method other than POST, 413 a body over the cap, 422 a repository no
// module is built from (the endpoint exists; what the event names does
// not), 503 Temporal unreachable (redeliver later). Each is logged, the
// secret never.
package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
)

// PathPrefix is where the receiver serves: PathPrefix + provider.
const PathPrefix = "/v1/webhooks/"

// Starter starts a delivery's Receive workflow, or finds the one a
// previous delivery of it started (Received.Existing).
type Starter interface {
	Receive(ctx context.Context, in meshapi.ReceiveInput) (Received, error)
}

// Received is the Receive workflow a delivery maps to.
type Received struct {
	ID string
	// Existing is true when the delivery had already been received.
	Existing bool
}

// Options configure a Handler.
type Options struct {
	// Secret is the key shared with the git host; it must not be empty.
	Secret secret.String
	// MaxBody caps a delivery's body in bytes.
	MaxBody int64
	// Routes say which modules deploy which repository and branch.
	Routes []Route
	// Starter starts the Receive workflows.
	Starter Starter
	Log     zerolog.Logger
}

// Handler serves the receiver's paths.
type Handler struct {
	o Options
}

// New checks o and returns the receiver's handler.
func New(o Options) (*Handler, error) {
	switch {
	case o.Secret == "":
		return nil, errors.New("merge receiver: no secret (worker.webhook_secret or worker.webhook_secret_file)")
	case o.MaxBody <= 0:
		return nil, errors.New("merge receiver: no body cap")
	case o.Starter == nil:
		return nil, errors.New("merge receiver: no starter")
	}
	o.Log = o.Log.With().Str("component", "merge-receiver").Logger()
	return &Handler{o: o}, nil
}

// answer is a status and its one line.
type answer struct {
	status int
	msg    string
}

func answerf(status int, format string, args ...any) answer {
	return answer{status, fmt.Sprintf(format, args...)}
}

// ServeHTTP answers one delivery.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, PathPrefix)
	ev := h.o.Log.With().Str("provider", name).Str("remote", r.RemoteAddr).Logger()
	a, delivery := h.serve(r, name)
	if a.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.msg+"\n")
	l := ev.Info()
	if a.status >= 400 {
		l = ev.Warn()
	}
	l.Int("status", a.status).Str("delivery", delivery).Msg(a.msg)
}

// serve decides the answer to a delivery, checking in the order a git
// host's operator fixes things; delivery is its ID once known.
func (h *Handler) serve(r *http.Request, name string) (a answer, delivery string) {
	p, ok := providers[name]
	if !ok || !strings.HasPrefix(r.URL.Path, PathPrefix) {
		return answerf(http.StatusNotFound, "no receiver at %s; post to %s%s, %s%s or %s%s", r.URL.Path, PathPrefix, GitHub, PathPrefix, GitLab, PathPrefix, Gitea), ""
	}
	if r.Method != http.MethodPost {
		return answerf(http.StatusMethodNotAllowed, "%s is not allowed; the git host posts its events", r.Method), ""
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, h.o.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return answerf(http.StatusRequestEntityTooLarge, "the body is over the receiver's cap of %d bytes (worker.webhook_max_body)", h.o.MaxBody), ""
	case err != nil:
		return answerf(http.StatusBadRequest, "could not read the body: %v", err), ""
	}
	if err := p.verify(r.Header, body, []byte(h.o.Secret.Reveal())); err != nil {
		return answerf(http.StatusUnauthorized, "refused: %v", err), ""
	}
	delivery = deliveryID(p.delivery(r.Header), body)
	switch event := p.event(r.Header); {
	case event == "":
		return answerf(http.StatusBadRequest, "no event type header; is this a %s webhook?", name), delivery
	case p.ping != "" && event == p.ping:
		return answerf(http.StatusOK, "pong: the secret matches; push events to a branch a module deploys start its plans"), delivery
	case event != p.push:
		return answerf(http.StatusAccepted, "ignored: %q is not a push event; only pushes start plans", event), delivery
	}
	push, err := p.parse(body)
	if err != nil {
		return answerf(http.StatusBadRequest, "malformed push event: %v", err), delivery
	}
	return h.received(r.Context(), name, delivery, push), delivery
}

// received matches a well-formed push to the modules that deploy it and
// starts its Receive workflow.
func (h *Handler) received(ctx context.Context, name, delivery string, p push) answer {
	branch, ok := strings.CutPrefix(p.Ref, "refs/heads/")
	if !ok {
		return answerf(http.StatusAccepted, "ignored: %s is not a branch", p.Ref)
	}
	modules, others := match(h.o.Routes, p, branch)
	switch {
	case len(modules) == 0 && len(others) == 0:
		return answerf(http.StatusUnprocessableEntity, "unknown repository %s: no module's repo or source names it", p.Repository)
	case len(modules) == 0:
		return answerf(http.StatusAccepted, "ignored: no module deploys branch %s of %s (they deploy %s)", branch, p.Repository, strings.Join(others, ", "))
	case zeroCommit(p.After):
		return answerf(http.StatusAccepted, "ignored: branch %s of %s was deleted; nothing to deploy", branch, p.Repository)
	}
	in := meshapi.ReceiveInput{Provider: name, Delivery: delivery, Repository: p.Repository,
		Branch: branch, Before: p.Before, After: p.After, Modules: modules}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := h.o.Starter.Receive(ctx, in)
	if err != nil {
		h.o.Log.Error().Err(err).Str("delivery", delivery).Msg("could not start the delivery's workflow")
		return answerf(http.StatusServiceUnavailable, "could not start workflow %s; redeliver once Temporal is reachable", meshapi.ReceiveID(name, delivery))
	}
	what := fmt.Sprintf("push of %s to %s of %s (modules %s); workflow %s", mesh.ShortCommit(p.After), branch, p.Repository, strings.Join(modules, ", "), got.ID)
	if got.Existing {
		return answerf(http.StatusOK, "already received: %s", what)
	}
	return answerf(http.StatusAccepted, "accepted: %s starts the plans of the modules it touches", what)
}

// deliveryOK is a delivery ID the receiver puts into a workflow ID as it
// is: what GitHub (a UUID), GitLab and Gitea send.
var deliveryOK = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// deliveryID is the git host's delivery ID or, when it sends none (or one
// unfit for a workflow ID), the hex SHA-256 of the body: either way the
// same for a re-delivery.
func deliveryID(given string, body []byte) string {
	if deliveryOK.MatchString(given) {
		return given
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}
