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
	if err == nil {
		return ""
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
		return "the registry asks for credentials this host did not give or got wrong: set the host agent's --registry-username and --registry-password (the registry's pull credential)"
	case status == http.StatusForbidden || has("denied"):
		return "the registry refused this host's credential"
	case status == http.StatusNotFound || has("manifest unknown", "not found", "name unknown"):
		return "the image is not in the registry (pushed to another, or deleted)"
	case has("connection refused", "no such host", "i/o timeout", "timeout awaiting", "connection reset", "eof"):
		return "the registry did not answer: is it running, and reachable from this machine?"
	}
	return ""
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
