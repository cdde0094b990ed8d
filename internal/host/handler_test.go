package host_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// stub is an agent whose answers the test chooses.
type stub struct {
	report   mesh.Report
	applyErr error
	applied  []mesh.Declaration
}

func (s *stub) Report(context.Context) (mesh.Report, error) { return s.report, nil }

func (s *stub) Apply(_ context.Context, d mesh.Declaration) (host.ApplyResult, error) {
	if s.applyErr != nil {
		return host.ApplyResult{}, s.applyErr
	}
	s.applied = append(s.applied, d)
	return host.ApplyResult{Seq: d.Seq}, nil
}

func do(t *testing.T, h http.Handler, method, path, auth, body string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Result(), string(b)
}

const body1 = `{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[]}`

func TestHandlerAuth(t *testing.T) {
	h := host.NewHandler(&stub{}, secret)
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + secret + "x", secret, "Basic " + secret} {
		resp, body := do(t, h, http.MethodGet, host.PathReport, auth, "")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, auth)
		assert.Contains(t, body, `"code":"unauthorized"`)
		assert.NotContains(t, body, secret)
	}
	resp, _ := do(t, h, http.MethodPost, host.PathDeclarations, "Bearer nope", body1)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, body := do(t, h, http.MethodGet, host.PathReport, "Bearer "+secret, "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, `"containers":[]`)

	resp, _ = do(t, h, http.MethodGet, host.PathHealthz, "", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "health check needs no token")
}

func TestHandlerNoTokenConfigured(t *testing.T) {
	h := host.NewHandler(&stub{}, "")
	resp, _ := do(t, h, http.MethodGet, host.PathReport, "Bearer anything", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestHandlerRejectsMalformedBodies(t *testing.T) {
	s := &stub{}
	h := host.NewHandler(s, "")
	for name, body := range map[string]string{
		"not json":      `{`,
		"unknown field": `{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[],"extra":1}`,
		"unknown nested": `{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[` +
			`{"module":"api","digest":"x","generation":1,"tag":"latest"}]}`,
		"trailing":   body1 + `{}`,
		"wrong type": `{"machine":"m1","seq":"one"}`,
	} {
		resp, got := do(t, h, http.MethodPost, host.PathDeclarations, "", body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		assert.Contains(t, got, `"code":"invalid"`, name)
	}
	assert.Empty(t, s.applied)

	big := `{"machine":"m1","seq":1,"plan":"` + strings.Repeat("x", host.MaxBodyBytes) + `"}`
	resp, got := do(t, h, http.MethodPost, host.PathDeclarations, "", big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, got, `"code":"invalid"`)

	resp, _ = do(t, h, http.MethodPost, host.PathDeclarations, "", body1)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Len(t, s.applied, 1)
}

func TestHandlerMapsRefusals(t *testing.T) {
	for code, status := range map[string]int{
		host.CodeSequence:  http.StatusConflict,
		host.CodeDowngrade: http.StatusConflict,
		host.CodeUnpinned:  http.StatusBadRequest,
		host.CodeInvalid:   http.StatusBadRequest,
	} {
		h := host.NewHandler(&stub{applyErr: &host.Refusal{Code: code, Message: "no", LastSeq: 5}}, "")
		resp, body := do(t, h, http.MethodPost, host.PathDeclarations, "", body1)
		assert.Equal(t, status, resp.StatusCode, code)
		assert.JSONEq(t, `{"error":{"code":"`+code+`","message":"no","last_seq":5}}`, body)
	}
	h := host.NewHandler(&stub{applyErr: errors.New("disk full")}, "")
	resp, body := do(t, h, http.MethodPost, host.PathDeclarations, "", body1)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Contains(t, body, `"code":"internal"`)
}

func TestHandlerMethods(t *testing.T) {
	h := host.NewHandler(&stub{}, "")
	resp, _ := do(t, h, http.MethodGet, host.PathDeclarations, "", "")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp, _ = do(t, h, http.MethodPost, host.PathReport, "", "")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// waiter is a stub that long-polls: it records what it was asked.
type waiter struct {
	stub
	after uint64
	wait  time.Duration
}

func (w *waiter) WaitReport(_ context.Context, after uint64, wait time.Duration) (mesh.Report, uint64, error) {
	w.after, w.wait = after, wait
	return w.report, 42, nil
}

func TestHandlerLongPoll(t *testing.T) {
	cases := []struct {
		query     string
		status    int
		after     uint64
		wait      time.Duration
		errorPart string
	}{
		{"", http.StatusOK, 0, 0, ""},
		{"?after=7&wait=1500ms", http.StatusOK, 7, 1500 * time.Millisecond, ""},
		{"?after=7&wait=2h", http.StatusOK, 7, host.MaxReportWait, ""},
		{"?wait=0s", http.StatusOK, 0, 0, ""},
		{"?wait=-1s", http.StatusBadRequest, 0, 0, "wait="},
		{"?wait=30", http.StatusBadRequest, 0, 0, "like 30s"},
		{"?after=seven", http.StatusBadRequest, 0, 0, "after="},
		{"?after=1&after=2", http.StatusBadRequest, 0, 0, "given 2 times"},
		{"?since=1", http.StatusBadRequest, 0, 0, "unknown query parameter"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			w := &waiter{}
			resp, body := do(t, host.NewHandler(w, ""), http.MethodGet, host.PathReport+tc.query, "", "")
			assert.Equal(t, tc.status, resp.StatusCode, body)
			if tc.status != http.StatusOK {
				assert.Contains(t, body, `"code":"invalid"`)
				assert.Contains(t, body, tc.errorPart)
				return
			}
			assert.Equal(t, "42", resp.Header.Get(host.HeaderReportRevision))
			assert.Equal(t, tc.after, w.after)
			assert.Equal(t, tc.wait, w.wait)
		})
	}

	// A host that cannot wait answers at once, with no revision.
	resp, _ := do(t, host.NewHandler(&stub{}, ""), http.MethodGet, host.PathReport+"?after=7&wait=1s", "", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(host.HeaderReportRevision))
}
