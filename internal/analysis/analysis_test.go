package analysis

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
)

func TestJudge(t *testing.T) {
	good := meshapi.Measurement{Passed: true}
	bad := meshapi.Measurement{}
	broken := meshapi.Measurement{Error: "prometheus: connection refused"}
	check := func(count, limit int) config.Check { return config.Check{Count: count, FailureLimit: limit} }
	for _, tc := range []struct {
		name  string
		check config.Check
		ms    []meshapi.Measurement
		want  meshapi.Verdict
	}{
		{"nothing yet", check(3, 0), nil, meshapi.AnalysisRunning},
		{"one good of three", check(3, 0), []meshapi.Measurement{good}, meshapi.AnalysisRunning},
		{"three good", check(3, 0), []meshapi.Measurement{good, good, good}, meshapi.AnalysisPassed},
		{"one bad, no tolerance", check(3, 0), []meshapi.Measurement{good, bad}, meshapi.AnalysisFailed},
		{"one bad within the limit", check(3, 1), []meshapi.Measurement{good, bad}, meshapi.AnalysisRunning},
		{"bad within the limit, count reached", check(3, 1), []meshapi.Measurement{good, bad, good}, meshapi.AnalysisPassed},
		{"bad beyond the limit", check(5, 1), []meshapi.Measurement{bad, good, bad}, meshapi.AnalysisFailed},
		{"errors are not passes", check(2, 0), []meshapi.Measurement{good, broken, broken}, meshapi.AnalysisRunning},
		{"errors are not failures", check(2, 0), []meshapi.Measurement{broken, good, broken, good}, meshapi.AnalysisPassed},
		{"only errors", check(1, 0), []meshapi.Measurement{broken, broken, broken}, meshapi.AnalysisRunning},
		{"failure before count decides at once", check(10, 0), []meshapi.Measurement{bad}, meshapi.AnalysisFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Judge(tc.check, tc.ms))
		})
	}
}

// TestErrorsInARow: only the run of errors at the end counts against
// ErrorLimit; errors between judged measurements are forgiven.
func TestErrorsInARow(t *testing.T) {
	good := meshapi.Measurement{Passed: true}
	bad := meshapi.Measurement{}
	broken := meshapi.Measurement{Error: "prometheus: connection refused"}
	for _, tc := range []struct {
		name string
		ms   []meshapi.Measurement
		want int
	}{
		{"none", nil, 0},
		{"ends judged", []meshapi.Measurement{broken, broken, good}, 0},
		{"a failed measurement ends a run too", []meshapi.Measurement{broken, bad}, 0},
		{"only errors", []meshapi.Measurement{broken, broken, broken}, 3},
		{"interleaved", []meshapi.Measurement{broken, good, broken, bad, broken, broken}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ErrorsInARow(tc.ms))
		})
	}
}

var vars = config.AnalysisVars{Plan: "plan-1", Module: "shop", Commit: "abc", Generation: 7, Tier: 1, Machines: []string{"m1", "m2"}}

// promAPI is a stand-in for the query API's envelope, for the tests of what
// is sent (auth, TLS, the query) rather than of Prometheus itself, which
// TestPrometheus runs for real.
func promAPI(t *testing.T, seen *http.Request, result string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		*seen = *r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":` + result + `}}`))
		assert.NoError(t, err)
	}
}

func TestPrometheusAuth(t *testing.T) {
	var seen http.Request
	srv := httptest.NewServer(promAPI(t, &seen, `[1700000000,"0.25"]`))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("from-file\n"), 0o600))
	check := config.Check{Query: `sum(errors{module="{{.Module}}",machine=~"{{join .Machines "|"}}"})`, Success: "result < 0.5"}
	for _, tc := range []struct {
		name string
		prom config.Prometheus
		want string
	}{
		{"none", config.Prometheus{}, ""},
		{"bearer token", config.Prometheus{BearerToken: "s3cret"}, "Bearer s3cret"},
		{"bearer token file", config.Prometheus{BearerTokenFile: tokenFile}, "Bearer from-file"},
		{"basic auth", config.Prometheus{BasicAuth: &config.BasicAuth{Username: "ops", Password: "pw"}}, "Basic b3BzOnB3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.prom
			p.Address = srv.URL + "/"
			at := time.UnixMilli(1700000000500)
			m := Measure(context.Background(), config.Provider{Prometheus: &p}, check, vars, at)
			require.Empty(t, m.Error)
			assert.Equal(t, 0.25, m.Value)
			assert.True(t, m.Passed)
			assert.Equal(t, at, m.At)
			assert.Equal(t, tc.want, seen.Header.Get("Authorization"))
			assert.Equal(t, "/api/v1/query", seen.URL.Path)
			assert.Equal(t, `sum(errors{module="shop",machine=~"m1|m2"})`, seen.URL.Query().Get("query"))
			assert.Equal(t, "1700000000.500", seen.URL.Query().Get("time"))
		})
	}
}

func TestPrometheusTLS(t *testing.T) {
	var seen http.Request
	srv := httptest.NewTLSServer(promAPI(t, &seen, `[1700000000,"2"]`))
	defer srv.Close()
	check := config.Check{Query: "up", Success: "result < 1"}

	p := config.Prometheus{Address: srv.URL}
	m := Measure(context.Background(), config.Provider{Prometheus: &p}, check, vars, time.Now())
	assert.Contains(t, m.Error, "certificate", "a certificate no trusted CA issued is refused")

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemText := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(caFile, pemText, 0o600))
	p.TLS = &config.ProviderTLS{CAFile: caFile}
	m = Measure(context.Background(), config.Provider{Prometheus: &p}, check, vars, time.Now())
	require.Empty(t, m.Error)
	assert.Equal(t, 2.0, m.Value)
	assert.False(t, m.Passed, "2 < 1 is false: a failed measurement, not an error")

	p.TLS = &config.ProviderTLS{InsecureSkipVerify: true}
	m = Measure(context.Background(), config.Provider{Prometheus: &p}, check, vars, time.Now())
	assert.Empty(t, m.Error)
}

func TestPrometheusErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		success string
		want    string
	}{
		{"server error", 503, "overloaded", "result < 1", "HTTP 503: overloaded"},
		{"bad query", 400, `{"status":"error","errorType":"bad_data","error":"parse error"}`, "result < 1", "bad_data: parse error"},
		{"not JSON", 200, "<html>", "result < 1", "not JSON"},
		{"empty vector", 200, `{"status":"success","data":{"resultType":"vector","result":[]}}`, "result < 1", "no data"},
		{"NaN", 200, `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`, "result < 1", "no data"},
		{"matrix", 200, `{"status":"success","data":{"resultType":"matrix","result":[]}}`, "result < 1", "instant query"},
		{"expression on a vector of several", 200, `{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"0"]},{"value":[1,"2"]}]}}`, "result < 1", "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := config.Prometheus{Address: srv.URL}
			m := Measure(context.Background(), config.Provider{Prometheus: &p}, config.Check{Query: "q", Success: tc.success}, vars, time.Now())
			assert.Contains(t, m.Error, tc.want)
			assert.False(t, m.Passed)
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := srv.URL
		srv.Close()
		p := config.Prometheus{Address: addr}
		m := Measure(context.Background(), config.Provider{Prometheus: &p}, config.Check{Query: "q", Success: "true"}, vars, time.Now())
		assert.Contains(t, m.Error, "prometheus:")
		assert.False(t, m.Passed)
	})
}

func TestWeb(t *testing.T) {
	var gotKey, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotPath = r.Header.Get("X-Api-Key"), r.URL.Path
		switch r.URL.Path {
		case "/down":
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		case "/garbage":
			_, _ = w.Write([]byte("ok"))
		default:
			_, _ = w.Write([]byte(`{"ok":true,"error_rate":0.2,"checks":[{"name":"db","ok":false}]}`))
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, url, path, success string
		wantValue                any
		wantPassed               bool
		wantError                string
	}{
		{"boolean member", "/status/{{.Module}}", "$.ok", "result", true, true, ""},
		{"number member", "/status/{{.Module}}", "$.error_rate", "result < 0.5", 0.2, true, ""},
		{"array index", "/status/{{.Module}}", "$.checks[0].ok", "result", false, false, ""},
		{"whole answer", "/status/{{.Module}}", "", "result.ok && result.error_rate < 0.1", nil, false, ""},
		{"missing member", "/status/{{.Module}}", "$.nope", "result", nil, false, `no member "nope"`},
		{"index out of range", "/status/{{.Module}}", "$.checks[3]", "result", nil, false, "beyond"},
		{"unsupported JSONPath", "/status/{{.Module}}", "$..ok", "result", nil, false, "only $ followed by"},
		{"filter refused", "/status/{{.Module}}", "$.checks[?(@.ok)]", "result", nil, false, "only $ followed by"},
		{"non-2xx", "/down", "$.ok", "result", nil, false, "HTTP 503: maintenance"},
		{"not JSON", "/garbage", "$.ok", "result", nil, false, "not JSON"},
		{"runtime expression error", "/status/{{.Module}}", "$.checks", "result < 1", nil, false, "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := config.Web{URL: srv.URL + tc.url, JSONPath: tc.path, Headers: map[string]secret.String{"X-Api-Key": "k3y"}}
			m := Measure(context.Background(), config.Provider{Web: &w}, config.Check{Success: tc.success}, vars, time.Now())
			if tc.wantError != "" {
				assert.Contains(t, m.Error, tc.wantError)
				assert.False(t, m.Passed)
				return
			}
			require.Empty(t, m.Error)
			assert.Equal(t, tc.wantPassed, m.Passed)
			if tc.wantValue != nil {
				assert.Equal(t, tc.wantValue, m.Value)
			}
			assert.Equal(t, "k3y", gotKey)
			assert.Equal(t, "/status/shop", gotPath)
		})
	}
}

// TestMeasurementJSON: a measurement goes into a plan's state as JSON and
// must come back the same shape, numbers included.
func TestMeasurementJSON(t *testing.T) {
	at := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	b, err := json.Marshal(meshapi.Measurement{At: at, Value: []float64{0.5, 1}, Passed: true})
	require.NoError(t, err)
	assert.JSONEq(t, `{"at":"2026-12-03T15:00:00Z","value":[0.5,1],"passed":true}`, string(b))
	assert.False(t, strings.Contains(string(b), "error"))
}
