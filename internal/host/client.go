package host

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/tlsca"
)

// Client is the host API as the worker's activities use it. It is an
// interface so that activities can be tested against anything answering the
// contract, and it is also what NewHandler serves, so an agent implements the
// same two calls in process.
type Client interface {
	// Report returns the host's own account of what runs.
	Report(ctx context.Context) (mesh.Report, error)
	// Apply sends a declaration. It returns once the host has durably
	// recorded it; the caller then polls Report until it runs.
	Apply(ctx context.Context, d mesh.Declaration) (ApplyResult, error)
}

// ReportWaiter is a host whose report can be long-polled: the agent in
// process, and HTTPClient over the wire. It is apart from Client so that a
// host without it (the test host, an agent that does not long-poll) is
// still a Client.
type ReportWaiter interface {
	// WaitReport returns the report and its revision at once when the
	// revision is not after, and otherwise once it changes or wait has
	// passed (at most MaxReportWait), whichever is first. Revisions are
	// opaque: compare them for equality only. after 0 or wait 0 answers
	// at once.
	WaitReport(ctx context.Context, after uint64, wait time.Duration) (mesh.Report, uint64, error)
}

// DefaultTimeout bounds one request of a client made without an
// *http.Client. Declarations are answered once recorded, not once running,
// so every call is short; a hung host must surface as unreachable quickly.
const DefaultTimeout = 10 * time.Second

// HTTPClient talks to one host agent. It never formats its token: String,
// GoString, Format and LogValue show only the URL, and are defined on the
// value so that a copy formats safely too; a client that ends up in a log or
// an error message leaks nothing.
type HTTPClient struct {
	base  string // without trailing slash
	token string
	hc    *http.Client
}

var (
	_ Client       = (*HTTPClient)(nil)
	_ ReportWaiter = (*HTTPClient)(nil)
)

// NewHTTPClient returns a client for the agent at baseURL (http or https, an
// optional path prefix, no credentials, query or fragment). token, when not
// empty, is sent as a bearer token. hc nil gets a client with DefaultTimeout
// that does not follow redirects, since a redirected POST would silently
// turn into a GET, and that shares its connections with every other such
// client (see newTransport).
func NewHTTPClient(baseURL, token string, hc *http.Client) (*HTTPClient, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("host url: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("host url %q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("host url %q: no host", u.Redacted())
	case u.User != nil:
		return nil, fmt.Errorf("host url %q: credentials belong in the token, not the url", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("host url %q: no query or fragment allowed", u.Redacted())
	}
	for _, r := range token {
		if r < 0x21 || r == 0x7f {
			// Do not echo the token: this error may well be logged.
			return nil, errors.New("host token: contains spaces or control characters")
		}
	}
	if hc == nil {
		hc = &http.Client{
			Timeout:   DefaultTimeout,
			Transport: sharedTransport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	return &HTTPClient{base: strings.TrimRight(u.String(), "/"), token: token, hc: hc}, nil
}

// sharedTransport carries the requests of every client made without an
// *http.Client of its own, so that they share their connections.
var sharedTransport = newTransport()

// idleConnsPerHost is how many idle connections a client keeps to each
// host: its report's long poll, a declaration and a push's wait for
// health may be open at once.
const idleConnsPerHost = 4

// newTransport is http.DefaultTransport with no cap on idle connections
// across hosts. The default keeps at most 100 across all of them, and a
// worker long-polls every host of the fleet (package fleetwatch): when
// more than 100 answers came at once, as when a tier's pushes change that
// many hosts' reports together, the connections past 100 were closed, and
// each was dialled again for the next poll (with TLS, a handshake each).
func newTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no cap across hosts
	tr.MaxIdleConnsPerHost = idleConnsPerHost
	return tr
}

// HTTPClientWithCA is the default client trusting the CAs in the PEM file
// caFile as well as the system's, for agents serving TLS with a certificate
// from a private CA.
func HTTPClientWithCA(caFile string) (*http.Client, error) {
	pool, err := tlsca.Pool(caFile, true)
	if err != nil {
		return nil, fmt.Errorf("host CA file: %w", err)
	}
	tr := newTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{
		Timeout:   DefaultTimeout,
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// URL is the agent's base URL, for logs and errors.
func (c *HTTPClient) URL() string { return c.base }

// String shows the URL only.
func (c HTTPClient) String() string { return "host " + c.base }

// GoString shows the URL only, so %#v cannot print the token.
func (c HTTPClient) GoString() string { return "host.HTTPClient(" + c.base + ")" }

// Format makes every verb, %+v included, print String.
func (c HTTPClient) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue keeps structured logs to the URL.
func (c HTTPClient) LogValue() slog.Value { return slog.StringValue(c.base) }

// Journal reads one page of the agent's journal, newest first: before is an
// entry index (0 for the newest), limit the page size (0 for the agent's
// default). It is not part of Client: the machine workflow never needs it;
// people asking a machine "why" do.
func (c *HTTPClient) Journal(ctx context.Context, before uint64, limit int) (JournalPage, error) {
	q := url.Values{}
	if before > 0 {
		q.Set("before", strconv.FormatUint(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := PathJournal
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page JournalPage
	if _, err := c.do(ctx, c.hc, http.MethodGet, path, nil, "journal", &page); err != nil {
		return JournalPage{}, err
	}
	return page, nil
}

// Report fetches the host's report.
func (c *HTTPClient) Report(ctx context.Context) (mesh.Report, error) {
	var rep mesh.Report
	if _, err := c.do(ctx, c.hc, http.MethodGet, PathReport, nil, "report", &rep); err != nil {
		return mesh.Report{}, err
	}
	return rep, nil
}

// WaitReport long-polls the host's report (see ReportWaiter), so that a
// caller waiting for a container to count healthy is told of each change
// as it happens instead of polling. A revision of 0 means the host does not
// long-poll (it sent no HeaderReportRevision) and answered at once: the
// caller must then wait between calls itself. wait is capped at
// MaxReportWait, and the client's own timeout is stretched by it.
func (c *HTTPClient) WaitReport(ctx context.Context, after uint64, wait time.Duration) (mesh.Report, uint64, error) {
	wait = min(max(wait, 0), MaxReportWait)
	q := url.Values{}
	if after != 0 {
		q.Set(QueryAfter, strconv.FormatUint(after, 10))
	}
	hc := c.hc
	if wait > 0 {
		q.Set(QueryWait, wait.String())
		if hc.Timeout > 0 {
			stretched := *hc
			stretched.Timeout += wait
			hc = &stretched
		}
	}
	path := PathReport
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var rep mesh.Report
	h, err := c.do(ctx, hc, http.MethodGet, path, nil, "report", &rep)
	if err != nil {
		return mesh.Report{}, 0, err
	}
	var rev uint64
	if v := h.Get(HeaderReportRevision); v != "" {
		if rev, err = strconv.ParseUint(v, 10, 64); err != nil {
			return mesh.Report{}, 0, fmt.Errorf("host %s: report: %s %q is not a revision: %w", c.base, HeaderReportRevision, v, err)
		}
	}
	return rep, rev, nil
}

// Apply sends d. A refusal is a *RefusedError, an unreachable or failing host
// an *UnreachableError; anything else (a malformed answer) is a plain error.
func (c *HTTPClient) Apply(ctx context.Context, d mesh.Declaration) (ApplyResult, error) {
	op := fmt.Sprintf("declaration %d", d.Seq)
	body, err := json.Marshal(d)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("host %s: encode %s: %w", c.base, op, err)
	}
	var res ApplyResult
	if _, err := c.do(ctx, c.hc, http.MethodPost, PathDeclarations, body, op, &res); err != nil {
		return ApplyResult{}, err
	}
	if res.Seq != d.Seq {
		return ApplyResult{}, fmt.Errorf("host %s: %s: answered for sequence %d", c.base, op, res.Seq)
	}
	return res, nil
}

// do sends one request with hc and decodes a 200 answer into out; it returns
// the answer's header for what travels there (the report's revision).
func (c *HTTPClient) do(ctx context.Context, hc *http.Client, method, path string, body []byte, op string, out any) (http.Header, error) {
	resp, err := c.send(ctx, hc, method, path, body, op)
	if err != nil {
		return nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return nil, c.failed(resp, op)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, &UnreachableError{URL: c.base, Err: fmt.Errorf("%s: read answer: %w", op, err)}
	}
	if len(b) > MaxBodyBytes {
		return nil, fmt.Errorf("host %s: %s: answer exceeds %d bytes", c.base, op, MaxBodyBytes)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("host %s: %s: decode answer: %w", c.base, op, err)
	}
	return resp.Header, nil
}

// send sends one request with hc, with the token; the caller drains and
// closes the answer. An error is the caller's own cancellation, wrapped,
// or an *UnreachableError.
func (c *HTTPClient) send(ctx context.Context, hc *http.Client, method, path string, body []byte, op string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("host %s: %s: %w", c.base, op, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The caller giving up is not the host's fault; a deadline, however,
		// is the caller's way of saying the host did not answer in time.
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, fmt.Errorf("host %s: %s: %w", c.base, op, ctx.Err())
		}
		return nil, &UnreachableError{URL: c.base, Err: err}
	}
	return resp, nil
}

// drain reads what is left of an answer (up to MaxBodyBytes, so that the
// connection can be reused) and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyBytes))
	_ = resp.Body.Close()
}

// failed is the error of an answer other than 200: a refusal (4xx with the
// API's error body, or 501 unsupported), a host that cannot serve now (5xx,
// 408, 429), or something else answering (a 4xx without the body).
func (c *HTTPClient) failed(resp *http.Response, op string) error {
	code := resp.StatusCode
	var b []byte
	if code >= 400 {
		b, _ = io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
	}
	var eb errorBody
	refused := code >= 400 && json.Unmarshal(b, &eb) == nil && eb.Error.Code != ""
	switch {
	case refused && code == http.StatusNotImplemented && eb.Error.Code == CodeUnsupported:
		// Not transient: this host will never do it.
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return &UnreachableError{URL: c.base, Err: fmt.Errorf("%s: %s", op, statusText(code, bytes.NewReader(b)))}
	case code < 400:
		return fmt.Errorf("host %s: %s: unexpected %s", c.base, op, statusText(code, resp.Body))
	case !refused:
		return &StatusError{URL: c.base, Op: op, Status: code, Text: statusText(code, bytes.NewReader(b))}
	}
	return &RefusedError{
		URL: c.base, Op: op, Status: code,
		Code: eb.Error.Code, Message: eb.Error.Message, LastSeq: eb.Error.LastSeq,
	}
}

// statusText names a status and the start of the body, for errors that have
// nothing better to say.
func statusText(code int, body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 200))
	s := strings.TrimSpace(string(b))
	if s == "" {
		return fmt.Sprintf("status %d", code)
	}
	return fmt.Sprintf("status %d: %q", code, s)
}

// RefusedError is the host saying no: a 4xx with an error body. Retrying the
// same request cannot help; the caller decides from Code what to do.
type RefusedError struct {
	// URL is the host's base URL.
	URL string
	// Op is what was refused: "report" or "declaration <seq>".
	Op      string
	Status  int
	Code    string
	Message string
	// LastSeq is the last sequence the host had applied.
	LastSeq uint64
}

// Error names the host, what was refused and why, never the token.
func (e *RefusedError) Error() string {
	s := fmt.Sprintf("host %s: refused %s: %s: %s", e.URL, e.Op, e.Code, e.Message)
	if e.Code == CodeSequence {
		s += fmt.Sprintf(" (last applied %d)", e.LastSeq)
	}
	return s
}

// UnreachableError is a host that could not answer: connection refused, a
// timeout, a 5xx. It is transient; the caller retries within its budget and,
// for a declaration, checks the report first since the host may have
// recorded it before the answer was lost.
type UnreachableError struct {
	URL string
	Err error
}

// Error names the host and the cause.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("host %s: unreachable: %v", e.URL, e.Err)
}

// Unwrap exposes the cause, so errors.Is(err, context.DeadlineExceeded)
// works.
func (e *UnreachableError) Unwrap() error { return e.Err }

// IsRefused returns the refusal in err's chain, if any.
func IsRefused(err error) (*RefusedError, bool) {
	var r *RefusedError
	ok := errors.As(err, &r)
	return r, ok
}

// StatusError is an answer in the 4xx range without the API's error body:
// something between the caller and the agent answered (a proxy), or it is
// not a meshroll host agent. It is neither a refusal nor unreachable.
type StatusError struct {
	// URL is the host's base URL.
	URL string
	// Op is what was asked: "report" or "declaration <seq>".
	Op     string
	Status int
	// Text is the status and the start of the body.
	Text string
}

// Error names the host, what was asked and the answer.
func (e *StatusError) Error() string {
	return fmt.Sprintf("host %s: %s: unexpected %s", e.URL, e.Op, e.Text)
}

// Unauthorized returns the status of a host's 401 or 403 in err's chain,
// with the API's error body (code unauthorized) or without (a proxy's): the
// caller's token, or the lack of one, is what the host turned away.
func Unauthorized(err error) (status int, ok bool) {
	denied := func(status int) bool { return status == http.StatusUnauthorized || status == http.StatusForbidden }
	if r, refused := IsRefused(err); refused {
		return r.Status, r.Code == CodeUnauthorized || denied(r.Status)
	}
	var s *StatusError
	if errors.As(err, &s) && denied(s.Status) {
		return s.Status, true
	}
	return 0, false
}

// IsUnreachable reports whether err's chain holds an *UnreachableError.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}
