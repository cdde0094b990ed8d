package registry

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/stretchr/testify/require"
)

func TestPullCause(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"exec: 401", &transport.Error{StatusCode: http.StatusUnauthorized}, "asks for credentials"},
		{"docker: no credentials", errors.New(`docker POST /images/create: 500 Get "http://r/v2/x/manifests/sha256:a": no basic auth credentials`), "asks for credentials"},
		{"exec: 403", &transport.Error{StatusCode: http.StatusForbidden}, "refused this host's credential"},
		{"exec: 404", &transport.Error{StatusCode: http.StatusNotFound}, "not in the registry"},
		{"docker: manifest unknown", errors.New("docker POST /images/create: 404 manifest unknown: manifest unknown"), "not in the registry"},
		{"down", errors.New(`Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused`), "did not answer"},
		{"something else", errors.New("disk full"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PullCause(tc.err)
			if tc.want == "" {
				require.Empty(t, got)
				require.Equal(t, "pull r/x@sha256:a: disk full", PullError("r/x@sha256:a", tc.err).Error())
				return
			}
			require.Contains(t, got, tc.want)
			e := PullError("r/x@sha256:a", tc.err)
			require.Contains(t, e.Error(), "pull r/x@sha256:a: "+got)
			require.ErrorIs(t, e, tc.err)
		})
	}
}

func TestPullRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"401", PullError("r/x@sha256:a", &transport.Error{StatusCode: http.StatusUnauthorized}), false},
		{"403", PullError("r/x@sha256:a", &transport.Error{StatusCode: http.StatusForbidden}), false},
		{"docker: manifest unknown", PullError("r/x@sha256:a", errors.New("docker POST /images/create: 404 manifest unknown: manifest unknown")), false},
		{"503", PullError("r/x@sha256:a", &transport.Error{StatusCode: http.StatusServiceUnavailable}), true},
		{"down", PullError("r/x@sha256:a", errors.New("dial tcp 127.0.0.1:1: connect: connection refused")), true},
		{"something else", PullError("r/x@sha256:a", errors.New("disk full")), true},
		{"not a pull's error", errors.New("open /state/x: permission denied"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, PullRetryable(tc.err))
		})
	}
}
