package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/host"
)

// FuzzDeclarationDecoder throws arbitrary bodies at the agent's declaration
// endpoint. Whatever arrives, the agent answers 200, 400, 409 or 413 (never
// a 500 or a panic), and a body it does not accept changes nothing it
// reports.
func FuzzDeclarationDecoder(f *testing.F) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, seed := range []string{
		`{"machine":"m1","seq":1,"plan":"plan/host/x","request":"r","containers":[{"module":"host","digest":"` + digest + `","generation":3}]}`,
		`{"machine":"m1","seq":1,"containers":[{"module":"host","digest":"sha256:abc","generation":3}]}`,
		`{"machine":"m1","seq":1,"containers":[{"module":"../etc/passwd","digest":"` + digest + `","generation":3}]}`,
		`{"machine":"m1","seq":1,"containers":[],"extra":true}`,
		`{"machine":"other","seq":18446744073709551615,"containers":[]}`,
		`{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":-9,"image":"reg/x:latest"}]}`,
		`{"machine":"m1"} {"machine":"m1"}`,
		// Health checks: good, impossible, and a report's fields where a
		// declaration's belong.
		`{"machine":"m1","seq":1,"plan":"p","request":"r","containers":[{"module":"host","digest":"` + digest + `","generation":3,` +
			`"health":{"http":{"port":0,"path":"/healthz"},"interval_ms":100,"timeout_ms":50,"min_healthy_ms":1000,"deadline_ms":60000}}]}`,
		`{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":3,"health":{"tcp":{"port":8080},"min_healthy_ms":0}}]}`,
		`{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":3,"health":{"exec":["/bin/check","-q"],"min_healthy_ms":5}}]}`,
		`{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":3,"health":{"http":{"port":1},"tcp":{"port":2},"exec":[]}}]}`,
		`{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":3,"health":{"http":{"port":-1,"path":"@evil"},"interval_ms":-5}}]}`,
		`{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":3,"health":"healthy","healthy_since":"2026-12-03T00:00:00Z"}]}`,
		`{"machine":"m1","seq":2,"containers":[{"module":"host","digest":"` + digest + `","generation":3,"check":{"min_healthy_ms":1},"restarts":2,` +
			`"last_probe":{"at":"2026-12-03T00:00:00Z","ok":false,"status":500,"exit_code":1,"output":"boom"}}]}`,
		`[`, ``, `null`, `{"seq":"1"}`,
	} {
		f.Add([]byte(seed))
	}
	// A clock that never moves: no probe runs and no min_healthy passes
	// behind the fuzzer's back, so the report changes only by its doing.
	a, err := Open(context.Background(), Options{Machine: "m1", StateDir: f.TempDir(), Runtime: NewNoopRuntime(0), Log: zerolog.Nop(), clock: newFakeClock()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = a.Close(context.Background()) })
	h := NewHandler(a, "")

	f.Fuzz(func(t *testing.T, body []byte) {
		before, err := a.Report(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, host.PathDeclarations, strings.NewReader(string(body))))
		switch rec.Code {
		case http.StatusOK:
			return
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body)
		}
		after, err := a.Report(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if after.LastSeq != before.LastSeq || after.LastRequest != before.LastRequest || len(after.Containers) != len(before.Containers) {
			t.Fatalf("refused body %q changed the report: %+v -> %+v", body, before, after)
		}
	})
}
