package fleetui

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshroll/meshroll/internal/payloads"
	"github.com/meshroll/meshroll/internal/secret"
)

// The Web UI reads a compressed payload as the JSON meshroll wrote: its
// origin (temporal.ui_url's) gets the CORS answer that lets the browser
// read the decoded payloads, any other origin does not, and a page with a
// token asks for it here too.
func TestCodecDecodesForTheWebUI(t *testing.T) {
	const ui = "http://127.0.0.1:8233"
	c := cfg("edge-1:1:host")
	c.Temporal.UIURL = ui + "/"
	large := map[string]string{"machines": strings.Repeat("edge-1 ", payloads.CompressAbove/7+1)}
	stored, err := payloads.Converter.ToPayload(large)
	require.NoError(t, err)
	require.Equal(t, "binary/zlib", string(stored.GetMetadata()["encoding"]), "the payload is stored compressed")
	small, err := payloads.Converter.ToPayload("plain")
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{stored, small}})
	require.NoError(t, err)

	post := func(t *testing.T, url, method string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	decoded := func(t *testing.T, b []byte) {
		t.Helper()
		var out commonpb.Payloads
		require.NoError(t, protojson.Unmarshal(b, &out), "%s", b)
		require.Len(t, out.Payloads, 2)
		var got map[string]string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(out.Payloads[0], &got), "the large payload is plain JSON again")
		assert.Equal(t, large, got)
		var s string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(out.Payloads[1], &s), "a small payload passes through")
		assert.Equal(t, "plain", s)
	}

	for _, tc := range []struct {
		name    string
		token   string
		method  string
		path    string
		header  []string
		status  int
		cors    bool
		decodes bool
	}{
		{name: "the Web UI decodes", method: http.MethodPost, path: "/codec/decode", header: []string{"Origin", ui}, status: http.StatusOK, cors: true, decodes: true},
		{name: "the CLI decodes, without an origin", method: http.MethodPost, path: "/codec/decode", status: http.StatusOK, decodes: true},
		{name: "the Web UI's preflight", method: http.MethodOptions, path: "/codec/decode", header: []string{"Origin", ui, "Access-Control-Request-Method", "POST"}, status: http.StatusNoContent, cors: true},
		{name: "another origin's preflight is not let in", method: http.MethodOptions, path: "/codec/decode", header: []string{"Origin", "http://evil.example"}, status: http.StatusNoContent},
		{name: "another origin's answer is not shared", method: http.MethodPost, path: "/codec/decode", header: []string{"Origin", "http://127.0.0.1:9999"}, status: http.StatusOK, decodes: true},
		{name: "GET is refused", method: http.MethodGet, path: "/codec/decode", status: http.StatusMethodNotAllowed},
		{name: "another path", method: http.MethodPost, path: "/codec/other", status: http.StatusNotFound},
		{name: "a token is asked for", token: "s3cret", method: http.MethodPost, path: "/codec/decode", header: []string{"Origin", ui}, status: http.StatusUnauthorized, cors: true},
		{name: "a preflight needs no token", token: "s3cret", method: http.MethodOptions, path: "/codec/decode", header: []string{"Origin", ui}, status: http.StatusNoContent, cors: true},
		{name: "the token as a bearer", token: "s3cret", method: http.MethodPost, path: "/codec/decode", header: []string{"Authorization", "Bearer s3cret"}, status: http.StatusOK, decodes: true},
		{name: "the token as the page's cookie", token: "s3cret", method: http.MethodPost, path: "/codec/decode", header: []string{"Origin", ui, "Cookie", cookieName + "=s3cret"}, status: http.StatusOK, cors: true, decodes: true},
		{name: "a wrong token", token: "s3cret", method: http.MethodPost, path: "/codec/decode", header: []string{"Authorization", "Bearer nope"}, status: http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := server(t, edges(), c, func(o *Options) { o.Token = secret.String(tc.token) })
			resp, b := post(t, srv.URL+tc.path, tc.method, tc.header...)
			require.Equal(t, tc.status, resp.StatusCode, "%s", b)
			if tc.cors {
				assert.Equal(t, ui, resp.Header.Get("Access-Control-Allow-Origin"))
				assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
				assert.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")
			} else {
				assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
			}
			if tc.decodes {
				decoded(t, b)
			}
		})
	}
}

func TestFromWebUI(t *testing.T) {
	for _, tc := range []struct {
		origin, ui string
		want       bool
	}{
		{"https://temporal.example.com", "https://temporal.example.com/", true},
		{"https://temporal.example.com", "https://temporal.example.com/namespaces/default", true},
		{"http://temporal.example.com", "https://temporal.example.com", false},
		{"https://temporal.example.com:8443", "https://temporal.example.com", false},
		{"https://evil.example", "https://temporal.example.com", false},
		{"http://localhost:8233", "http://127.0.0.1:8233", true},
		{"http://[::1]:8233", "http://127.0.0.1:8233", true},
		{"http://127.0.0.1:8233", "http://localhost:8233", true},
		{"http://127.0.0.1:9999", "http://127.0.0.1:8233", false},
		{"http://localhost.evil.example:8233", "http://127.0.0.1:8233", false},
		{"", "http://127.0.0.1:8233", false},
		{"http://127.0.0.1:8233", "", false},
		{"null", "http://127.0.0.1:8233", false},
	} {
		assert.Equal(t, tc.want, fromWebUI(tc.origin, tc.ui), "origin %q, ui_url %q", tc.origin, tc.ui)
	}
}
