package registry

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/secret"
)

// statusOf is the HTTP status a registry answered err with, 0 if none.
func statusOf(err error) int {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode
	}
	return 0
}

// Beyond loopback the embedded registry asks who is there: the worker's
// push credential pushes and pulls, the hosts' pull credential only pulls,
// anyone else is turned away; and deletes are off unless asked for.
func TestAccess(t *testing.T) {
	access := Access{
		Push: Credential{Username: "worker", Password: secret.String("push-secret")},
		Pull: Credential{Username: "hosts", Password: secret.String("pull-secret")},
	}
	_, hs, _ := serve(t, t.TempDir(), "registry with access", WithAccess(access))
	as := func(user, pass string) client {
		return client{t: t, opts: Options{Address: hs.URL, Username: user, Password: secret.String(pass)}}
	}
	worker, hosts := as("worker", "push-secret"), as("hosts", "pull-secret")

	img := randomImage(t)
	digest := worker.push("meshroll/app:v1", img)
	_, err := hosts.manifest("meshroll/app@" + digest)
	require.NoError(t, err, "the hosts' credential pulls")

	err = remote.Write(hosts.ref("meshroll/app:v2"), randomImage(t), hosts.remote()...)
	require.Equal(t, http.StatusForbidden, statusOf(err), "the hosts' credential does not push: %v", err)
	for _, c := range []client{as("", ""), as("worker", "wrong"), as("hosts", "push-secret")} {
		_, err := c.manifest("meshroll/app@" + digest)
		require.Equal(t, http.StatusUnauthorized, statusOf(err), "user %q: %v", c.opts.Username, err)
	}
	err = remote.Delete(worker.ref("meshroll/app@"+digest), worker.remote()...)
	require.Equal(t, http.StatusMethodNotAllowed, statusOf(err), "deletes are off: %v", err)
	_, err = hosts.manifest("meshroll/app@" + digest)
	require.NoError(t, err, "the image is still there")
}
