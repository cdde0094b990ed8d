package liveness

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProbes(t *testing.T) {
	notReady := func(context.Context) error { return errors.New("journal closed") }
	for _, tc := range []struct {
		name     string
		ready    Check
		path     string
		method   string
		wantCode int
		want     Status
	}{
		{"live", notReady, PathLive, http.MethodGet, http.StatusOK, Status{OK: true}},
		{"ready without a check", nil, PathReady, http.MethodGet, http.StatusOK, Status{OK: true}},
		{"ready", func(context.Context) error { return nil }, PathReady, http.MethodGet, http.StatusOK, Status{OK: true}},
		{"not ready", notReady, PathReady, http.MethodGet, http.StatusServiceUnavailable, Status{Reason: "journal closed"}},
		{"post is refused", nil, PathReady, http.MethodPost, http.StatusMethodNotAllowed, Status{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			Mount(mux, tc.ready)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			require.Equal(t, tc.wantCode, rec.Code, rec.Body.String())
			if tc.wantCode == http.StatusMethodNotAllowed {
				return
			}
			var got Status
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadyCheckHasADeadline(t *testing.T) {
	mux := http.NewServeMux()
	Mount(mux, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no deadline")
		}
		return nil
	})
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathReady, nil))
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}
