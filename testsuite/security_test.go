package testsuite

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Host tokens never pass through workflow inputs: a plan pushing to hosts
// that require tokens converges, and no event of the plan's history or of
// its machine workflows' histories holds any token.
func TestTokensNeverInHistory(t *testing.T) {
	t.Parallel()
	// The base64 search finds a token at every alignment in a payload.
	for _, prefix := range []string{`{"t":"`, `{"to":"`, `{"tok":"`} {
		require.True(t, containsBase64([]byte(base64Std(prefix+machineToken("m")+`"}`)), machineToken("m")), prefix)
	}
	o := exampleMesh()
	o.tokens = true
	s := newStack(t, o)

	// The tokens are really required, so the plan below used them.
	for name, h := range s.hosts {
		resp, err := http.Get(h.URL() + host.PathReport)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s answers its report without a token", name)
	}

	st := s.converge("host", s.commit("host"))
	ids := []string{st.Plan}
	for name := range s.hosts {
		ids = append(ids, meshapi.MachineID(name))
	}
	ctx := context.Background()
	for _, id := range ids {
		it := s.c.GetWorkflowHistory(ctx, id, "", false, 0)
		h := &historypb.History{}
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, e)
		}
		require.NotEmpty(t, h.Events, "history of %s", id)
		data, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(h)
		require.NoError(t, err)
		for name := range s.hosts {
			// Payloads are base64 in the JSON form: look for the token's
			// text there too.
			require.False(t, strings.Contains(string(data), machineToken(name)) || containsBase64(data, machineToken(name)),
				"history of %s holds %s's host token", id, name)
		}
	}
}

// containsBase64 reports whether data holds s base64-encoded at any of the
// three alignments a substring of an encoded payload can have.
func containsBase64(data []byte, s string) bool {
	for pad := 0; pad < 3; pad++ {
		enc := base64Std(strings.Repeat("x", pad) + s)
		// Drop the characters that depend on the padding bytes and on what
		// follows s.
		start := (pad*8 + 5) / 6
		end := len(enc) - 4
		if end > start && strings.Contains(string(data), enc[start:end]) {
			return true
		}
	}
	return false
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
