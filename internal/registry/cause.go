package registry

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// PullCause says in a few words, with what to do, why pulling an image
// failed, for the one line a host reports about a push it could not run:
// the registry wants credentials, refused them, has no such image, or did
// not answer. "" when it cannot tell. It reads both go-containerregistry's
// errors (the exec runtime's pulls) and a Docker Engine's messages (the
// docker runtime's).
func PullCause(err error) string {
	switch pullKind(err) {
	case pullUnauthorized:
		return "the registry asks for credentials this host did not give or got wrong: set the host agent's --registry-username and --registry-password (the registry's pull credential)"
	case pullForbidden:
		return "the registry refused this host's credential"
	case pullNotFound:
		return "the image is not in the registry (pushed to another, or deleted)"
	case pullNoAnswer:
		return "the registry did not answer: is it running, and reachable from this machine?"
	}
	return ""
}

// PullRetryable says whether a pull that failed with err (a PullError)
// may succeed if tried again without anyone acting: false for a registry
// that wants other credentials, refuses them or has no such image, since a digest names the same bytes for
// ever and a host's credentials change only with its agent's flags; true
// for everything else, above all a registry that did not answer, which a
// moment later may. A runtime retries a retryable pull while the push
// waits (its running_timeout), so a registry that is down for a moment
// does not read as a broken build. An error that is not a PullError is
// retryable: it says nothing of the registry.
func PullRetryable(err error) bool {
	var pe *pullError
	if !errors.As(err, &pe) {
		return true
	}
	switch pullKind(pe.err) {
	case pullUnauthorized, pullForbidden, pullNotFound:
		return false
	}
	return true
}

// The kinds of pull failure PullCause words.
const (
	pullUnknown = iota
	pullUnauthorized
	pullForbidden
	pullNotFound
	pullNoAnswer
)

// pullKind reads both go-containerregistry's errors (the exec runtime's
// pulls) and a Docker Engine's messages (the docker runtime's).
func pullKind(err error) int {
	if err == nil {
		return pullUnknown
	}
	status := 0
	var te *transport.Error
	if errors.As(err, &te) {
		status = te.StatusCode
	}
	msg := strings.ToLower(err.Error())
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(msg, w) {
				return true
			}
		}
		return false
	}
	switch {
	case status == http.StatusUnauthorized || has("no basic auth credentials", "unauthorized", "authentication required"):
		return pullUnauthorized
	case status == http.StatusForbidden || has("denied"):
		return pullForbidden
	case status == http.StatusNotFound || has("manifest unknown", "not found", "name unknown"):
		return pullNotFound
	case has("connection refused", "no such host", "i/o timeout", "timeout awaiting", "connection reset", "eof"):
		return pullNoAnswer
	}
	return pullUnknown
}

// PullError is err from pulling ref, worded with its cause when PullCause
// can tell it.
func PullError(ref string, err error) error {
	if cause := PullCause(err); cause != "" {
		return &pullError{ref: ref, cause: cause, err: err}
	}
	return &pullError{ref: ref, err: err}
}

type pullError struct {
	ref, cause string
	err        error
}

func (e *pullError) Error() string {
	if e.cause == "" {
		return "pull " + e.ref + ": " + e.err.Error()
	}
	return "pull " + e.ref + ": " + e.cause + " (" + e.err.Error() + ")"
}

func (e *pullError) Unwrap() error { return e.err }
