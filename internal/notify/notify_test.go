package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
)

var gated = meshapi.NotifyEvent{
	Event: meshapi.EventPlanGated, Sequence: 2, Plan: "plan/host/0123456789abcdef", Module: "host", Commit: "0123456789abcdef",
	State: meshapi.PlanGated, Reason: "waiting for approval before tier 2",
	Command: "starter plan approve plan/host/0123456789abcdef --tier 2",
}

// The signature is the hex HMAC-SHA256 of the exact body under the secret,
// as a receiver computes it.
func TestSign(t *testing.T) {
	body := []byte(`{"event":"plan_gated"}`)
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	require.Equal(t, "sha256="+hex.EncodeToString(m.Sum(nil)), Sign(secret.String("s3cret"), body))
	require.NotEqual(t, Sign(secret.String("s3cret"), body), Sign(secret.String("other"), body))
}

func TestSlackText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		e     meshapi.NotifyEvent
		links Links
		want  string
	}{
		{
			name: "gated, with its command and both links",
			e:    gated, links: Links{WebUI: "https://ui.example/p", Fleet: "https://fleet.example/"},
			want: "*host* 0123456789ab plan gated: gated\nwaiting for approval before tier 2\n`starter plan approve plan/host/0123456789abcdef --tier 2`\n<https://ui.example/p|plan in the Web UI> · <https://fleet.example/|fleet page>",
		},
		{
			name: "halted, no links",
			e:    meshapi.NotifyEvent{Event: meshapi.EventPlanHalted, Module: "host", Commit: "0123456789abcdef", State: meshapi.PlanHalted, Reason: "edge-1 unreachable"},
			want: "*host* 0123456789ab plan halted: halted\nedge-1 unreachable",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, SlackText(tc.e, tc.links))
		})
	}
}

// What each kind of target receives: the webhook the event with its key,
// signed when it has a secret; Slack only {"text": ...}.
func TestSend(t *testing.T) {
	links := Links{Fleet: "https://fleet.example/"}
	for _, tc := range []struct {
		name      string
		kind      string
		key       secret.String
		status    int
		wantErr   string
		wantSig   bool
		wantField string // a key the body has
	}{
		{name: "signed webhook", kind: config.NotifyWebhook, key: "s3cret", status: 200, wantSig: true, wantField: "id"},
		{name: "unsigned webhook", kind: config.NotifyWebhook, status: 204, wantField: "links"},
		{name: "slack", kind: config.NotifySlack, status: 200, wantField: "text"},
		{name: "receiver down", kind: config.NotifyWebhook, status: 503, wantErr: "receiver answered 503 Service Unavailable: down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, body = r, must(io.ReadAll(r.Body))
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("down"))
			}))
			defer srv.Close()
			err := Send(context.Background(), srv.Client(), Target{Kind: tc.kind, URL: srv.URL + "/secret-path", Key: tc.key}, gated, links)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), "secret-path", "the URL is not in the error")
				return
			}
			require.NoError(t, err)
			var fields map[string]any
			require.NoError(t, json.Unmarshal(body, &fields))
			require.Contains(t, fields, tc.wantField)
			if tc.kind == config.NotifySlack {
				require.Len(t, fields, 1)
				require.Empty(t, got.Header.Get(KeyHeader))
				return
			}
			require.Equal(t, gated.Key(), got.Header.Get(KeyHeader))
			require.Equal(t, gated.Key(), fields["id"])
			require.Equal(t, "plan/host/0123456789abcdef#2-plan_gated", fields["id"])
			require.Equal(t, gated.Command, fields["command"])
			require.Equal(t, map[string]any{"fleet": "https://fleet.example/"}, fields["links"])
			if tc.wantSig {
				require.Equal(t, Sign(tc.key, body), got.Header.Get(SignatureHeader))
			} else {
				require.Empty(t, got.Header.Get(SignatureHeader))
			}
		})
	}
}

// An unreachable receiver's error does not name its URL (a Slack URL is
// its secret).
func TestSendUnreachableHidesURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/T000/B000/s3cret"
	srv.Close()
	err := Send(context.Background(), http.DefaultClient, Target{Kind: config.NotifySlack, URL: url}, gated, Links{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
