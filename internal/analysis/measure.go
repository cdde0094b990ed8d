package analysis

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/tlsca"
)

// maxBody bounds what is read of an answer: a query that returns a whole
// fleet's series by mistake should fail the measurement, not the worker.
const maxBody = 8 << 20

// Measure takes one measurement of check c from provider p for the build
// and tier in vars, at time now (the time a Prometheus query is evaluated
// at, and the Measurement's At). The context bounds the request.
//
// Every failure is in the Measurement's Error (see the package comment).
//
// A Prometheus query's result is a number when it is a scalar or a vector
// of one sample, and a []float64 when the vector has several. The slice is
// bound to result as it is, and the expression decides how to judge it:
// "every element must pass" is written all(result, # < 0.5), as the
// README's check table says. Binding the slice rather than running the
// expression once per element keeps one meaning for result across
// measurements and lets a check say something else of a vector (its max,
// its length) when that is what it means; "result < 0.5" on a vector of
// several is an expression error, reported, never a pass. An empty vector
// is the error "no data" (nothing was measured, so nothing passed), and so
// is a NaN or infinite sample (a ratio over no requests), which neither
// passes nor fails and cannot be kept in JSON.
//
// A web provider's answer is decoded JSON and json_path picks the result.
// Only the simple form is supported: $ followed by .name and [index]
// steps, such as $.checks[0].ok; wildcards, filters, recursive descent and
// quoted names are refused with an error measurement.
func Measure(ctx context.Context, p config.Provider, c config.Check, vars config.AnalysisVars, now time.Time) meshapi.Measurement {
	m := meshapi.Measurement{At: now}
	var (
		v   any
		err error
	)
	switch {
	case p.Prometheus != nil:
		v, err = measurePrometheus(ctx, *p.Prometheus, c.Query, vars, now)
	case p.Web != nil:
		v, err = measureWeb(ctx, *p.Web, vars)
	default:
		err = errors.New("provider has no kind (prometheus or web)")
	}
	if err != nil {
		m.Error = err.Error()
		return m
	}
	m.Value = v
	passed, err := judgeValue(c, v)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	m.Passed = passed
	return m
}

// judgeValue runs c's success expression with result bound to v.
func judgeValue(c config.Check, v any) (bool, error) {
	prog, err := c.Program()
	if err != nil {
		return false, fmt.Errorf("success %q: %w", c.Success, err)
	}
	out, err := expr.Run(prog, config.SuccessEnv{Result: v})
	if err != nil {
		return false, fmt.Errorf("success %q on %s: %w", c.Success, meshapi.ShortJSON(v, 200), err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("success %q returned %T, not a boolean", c.Success, out)
	}
	return b, nil
}

// Query is what check c asks of provider p for vars, as sent: a
// Prometheus check's query, or a web provider's URL (its query), its
// template executed; for a person who wants to run it themselves.
func Query(p config.Provider, c config.Check, vars config.AnalysisVars) (string, error) {
	if p.Web != nil {
		return render("url", p.Web.URL, vars)
	}
	return render("query", c.Query, vars)
}

// render executes a query or URL template on vars.
func render(name, text string, vars config.AnalysisVars) (string, error) {
	t, err := config.AnalysisTemplate(name, text)
	if err != nil {
		return "", fmt.Errorf("%s template: %w", name, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, vars); err != nil {
		return "", fmt.Errorf("%s template: %w", name, err)
	}
	return b.String(), nil
}

// promClient is an HTTP client with the provider's TLS settings. A client
// per measurement is cheap next to an interval of seconds or minutes, and
// re-reads a rotated CA file, as the bearer token file is re-read.
func promClient(tc *config.ProviderTLS) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tc != nil {
		// InsecureSkipVerify is the operator's explicit choice, which
		// config.Warnings reports at start.
		cfg := &tls.Config{InsecureSkipVerify: tc.InsecureSkipVerify}
		if tc.CAFile != "" {
			pool, err := tlsca.Pool(tc.CAFile, false)
			if err != nil {
				return nil, fmt.Errorf("tls ca_file: %w", err)
			}
			cfg.RootCAs = pool
		}
		tr.TLSClientConfig = cfg
	}
	return &http.Client{Transport: tr}, nil
}

// promAnswer is the Prometheus HTTP API's envelope of an instant query.
type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// promSample is a [time, "value"] pair, as scalars and vector samples are.
type promSample [2]any

func (s promSample) float() (float64, error) {
	str, ok := s[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", s[1])
	}
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", str, err)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("no data: the query's value is %s (a ratio over no samples?)", str)
	}
	return f, nil
}

func measurePrometheus(ctx context.Context, pr config.Prometheus, query string, vars config.AnalysisVars, now time.Time) (any, error) {
	q, err := render("query", query, vars)
	if err != nil {
		return nil, err
	}
	client, err := promClient(pr.TLS)
	if err != nil {
		return nil, err
	}
	form := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(now.UnixMilli())/1000, 'f', 3, 64)}}
	u := strings.TrimRight(pr.Address, "/") + "/api/v1/query?" + form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("prometheus request: %w", err)
	}
	tok, err := pr.Token()
	if err != nil {
		return nil, err
	}
	switch {
	case tok != "":
		req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	case pr.BasicAuth != nil:
		req.SetBasicAuth(pr.BasicAuth.Username, pr.BasicAuth.Password.Reveal())
	}
	status, body, err := get(client, req, "prometheus")
	if err != nil {
		return nil, err
	}
	var a promAnswer
	jerr := json.Unmarshal(body, &a)
	switch {
	case jerr == nil && a.Status == "error":
		// Prometheus answers 400 or 422 with its reason in the envelope.
		return nil, fmt.Errorf("prometheus: %s: %s", a.ErrorType, a.Error)
	case status/100 != 2:
		return nil, fmt.Errorf("prometheus: HTTP %d: %s", status, snippet(body))
	case jerr != nil:
		return nil, fmt.Errorf("prometheus: the answer is not JSON: %w", jerr)
	case a.Status != "success":
		return nil, fmt.Errorf("prometheus: status %q, want success", a.Status)
	}
	switch a.Data.ResultType {
	case "scalar":
		var s promSample
		if err := json.Unmarshal(a.Data.Result, &s); err != nil {
			return nil, fmt.Errorf("prometheus: scalar: %w", err)
		}
		return s.float()
	case "vector":
		var vs []struct {
			Value promSample `json:"value"`
		}
		if err := json.Unmarshal(a.Data.Result, &vs); err != nil {
			return nil, fmt.Errorf("prometheus: vector: %w", err)
		}
		if len(vs) == 0 {
			return nil, errors.New("no data: the query returned an empty vector (no series match, or the build has not been scraped yet)")
		}
		fs := make([]float64, len(vs))
		for i, s := range vs {
			if fs[i], err = s.Value.float(); err != nil {
				return nil, err
			}
		}
		if len(fs) == 1 {
			return fs[0], nil
		}
		return fs, nil
	}
	return nil, fmt.Errorf("prometheus: result type %q; a check's query must be an instant query giving a scalar or a vector (aggregate a range with rate() or *_over_time())", a.Data.ResultType)
}

func measureWeb(ctx context.Context, w config.Web, vars config.AnalysisVars) (any, error) {
	steps, err := parseJSONPath(w.JSONPath)
	if err != nil {
		return nil, err
	}
	u, err := render("url", w.URL, vars)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("web request: %w", err)
	}
	for h, v := range w.Headers {
		req.Header.Set(h, v.Reveal())
	}
	status, body, err := get(http.DefaultClient, req, "web")
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return nil, fmt.Errorf("web: HTTP %d: %s", status, snippet(body))
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("web: the answer is not JSON: %w", err)
	}
	return pick(doc, steps, w.JSONPath)
}

// get sends req asking for JSON and reads at most maxBody of the answer,
// whatever its status; what names the provider's kind in an error.
func get(client *http.Client, req *http.Request, what string) (int, []byte, error) {
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// The URL error names the whole request, a long encoded query a
		// person on call cannot read; the caller names the provider.
		var ue *url.Error
		if errors.As(err, &ue) {
			return 0, nil, fmt.Errorf("%s: %w", what, ue.Err)
		}
		return 0, nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: reading the answer: %w", what, err)
	}
	return resp.StatusCode, body, nil
}

// step is one step of a simple JSONPath: a member name, or an index when
// name is "".
type step struct {
	name  string
	index int
}

// simpleStep is one .name or [index] step at the start of the rest of a
// path.
var simpleStep = regexp.MustCompile(`^(?:\.([A-Za-z_][A-Za-z0-9_-]*)|\[([0-9]+)\])`)

// parseJSONPath reads the simple form Measure documents, refusing any
// other JSONPath rather than guessing at it.
func parseJSONPath(path string) ([]step, error) {
	if path == "" || path == "$" {
		return nil, nil
	}
	if !strings.HasPrefix(path, "$") {
		return nil, fmt.Errorf("json_path %q: must start at the root, $", path)
	}
	var steps []step
	for rest := path[1:]; rest != ""; {
		m := simpleStep.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("json_path %q: only $ followed by .name and [index] steps is supported (such as $.checks[0].ok), not %q", path, rest)
		}
		if m[1] != "" {
			steps = append(steps, step{name: m[1]})
		} else {
			i, _ := strconv.Atoi(m[2])
			steps = append(steps, step{index: i})
		}
		rest = rest[len(m[0]):]
	}
	return steps, nil
}

// pick follows steps into doc.
func pick(doc any, steps []step, path string) (any, error) {
	v := doc
	for i, s := range steps {
		switch {
		case s.name != "":
			o, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("json_path %q: step %d (.%s): not an object", path, i+1, s.name)
			}
			if v, ok = o[s.name]; !ok {
				return nil, fmt.Errorf("json_path %q: no member %q in the answer", path, s.name)
			}
		default:
			a, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("json_path %q: step %d ([%d]): not an array", path, i+1, s.index)
			}
			if s.index >= len(a) {
				return nil, fmt.Errorf("json_path %q: index %d beyond the array's %d elements", path, s.index, len(a))
			}
			v = a[s.index]
		}
	}
	return v, nil
}

// snippet is the start of an error answer's body, on one line, for an
// error message.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "(empty answer)"
	}
	return s
}
