package registry

import (
	"crypto/subtle"
	"fmt"
	"net/http"

	"github.com/meshroll/meshroll/internal/secret"
)

// Credential is a user name and password the embedded registry accepts
// (HTTP basic authentication).
type Credential struct {
	Username string
	Password secret.String
}

// set reports whether the credential names a user.
func (c Credential) set() bool { return c.Username != "" }

// matches compares in constant time, so that a wrong password takes as
// long as a right one.
func (c Credential) matches(user, pass string) bool {
	u := subtle.ConstantTimeCompare([]byte(user), []byte(c.Username))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(c.Password.Reveal()))
	return c.set() && u&p == 1
}

// Access is who may do what at the embedded registry. The zero value is
// the development default, for a registry listening on loopback only:
// anyone who reaches it may push and pull, and nothing may be deleted.
// With Push set, every request must authenticate: Push may push and pull
// (the worker), Pull may only pull (the hosts); anyone else is answered
// 401.
type Access struct {
	Push Credential
	Pull Credential
	// Deletes allows the distribution spec's content management
	// (deleting manifests, tags and blobs). meshroll never deletes, and a
	// deleted image is one a host can no longer pull, so it is off unless
	// asked for.
	Deletes bool
}

// WithAccess sets who may do what (the default is Access's zero value).
func WithAccess(a Access) ServerOption {
	return func(c *serverConfig) { c.access = a }
}

// guard serves next to whom a allows it, answering others with the
// distribution spec's error codes.
func (a Access) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && !a.Deletes {
			refuse(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "deletes are off at this registry (registry.deletes in the mesh config turns them on)")
			return
		}
		if !a.Push.set() {
			next.ServeHTTP(w, r)
			return
		}
		user, pass, ok := r.BasicAuth()
		switch {
		case ok && a.Push.matches(user, pass):
		case ok && a.Pull.matches(user, pass):
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				refuse(w, http.StatusForbidden, "DENIED", fmt.Sprintf("user %s may only pull from this registry", user))
				return
			}
		default:
			w.Header().Set("WWW-Authenticate", `Basic realm="meshroll registry"`)
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required: the registry's push or pull credentials")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers an error in the distribution spec's error body.
func refuse(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`+"\n", code, message)
}
