package host

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// NewHandler serves a host's API over HTTP. The agent implements Client in
// process (Report and Apply behind a Ledger) and the handler is only the wire:
// authentication, body limits, strict decoding and the mapping of a *Refusal
// to its status. The real agent and hosttest share it so that the two cannot
// answer differently. An empty token turns authentication off; the health
// check never needs it, so probes need no secret. An agent that is also a
// ReportWaiter has its report long-polled (see HeaderReportRevision); any
// other answers the report at once, whatever the query asks. An agent that
// is also a LogStreamer serves its containers' logs (PathLogs); any other
// answers them 501 unsupported.
func NewHandler(agent Client, token string) http.Handler {
	h := &handler{agent: agent}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		h.tokenSum = &sum
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	mux.HandleFunc("GET "+PathReport, h.authed(h.report))
	mux.HandleFunc("POST "+PathDeclarations, h.authed(h.apply))
	mux.HandleFunc("GET "+PathLogs, h.authed(h.logs))
	return mux
}

type handler struct {
	agent    Client
	tokenSum *[sha256.Size]byte
}

// authed checks the bearer token (see RequireToken).
func (h *handler) authed(next http.HandlerFunc) http.HandlerFunc {
	if h.tokenSum == nil {
		return next
	}
	return requireSum(*h.tokenSum, next).ServeHTTP
}

// RequireToken wraps next so that it answers only requests carrying
// "Authorization: Bearer <token>", and 401 with nothing else otherwise; an
// empty token turns the check off. It is how every path of the host API but
// the health check is guarded, including agents' own additions (the
// journal). Both sides are hashed before the constant-time compare so that
// not even the token's length leaks.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	return requireSum(sha256.Sum256([]byte(token)), next)
}

func requireSum(want [sha256.Size]byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="meshroll-host"`)
			WriteRefusal(w, &Refusal{Code: CodeUnauthorized, Message: "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// waitSlack is how much longer than its wait a long poll's answer may take
// to write: the server's write timeout is for ordinary answers, and a long
// poll answers late by design.
const waitSlack = 10 * time.Second

func (h *handler) report(w http.ResponseWriter, r *http.Request) {
	q, err := Query(r, QueryAfter, QueryWait)
	var after uint64
	var wait time.Duration
	if err == nil && q[QueryAfter] != "" {
		if after, err = strconv.ParseUint(q[QueryAfter], 10, 64); err != nil {
			err = fmt.Errorf("%s=%q: want a revision the report was answered with", QueryAfter, q[QueryAfter])
		}
	}
	if err == nil && q[QueryWait] != "" {
		if wait, err = time.ParseDuration(q[QueryWait]); err != nil || wait < 0 {
			err = fmt.Errorf("%s=%q: want a duration of 0 or more, like 30s (at most %s)", QueryWait, q[QueryWait], MaxReportWait)
		}
		wait = min(wait, MaxReportWait)
	}
	if err != nil {
		WriteRefusal(w, &Refusal{Code: CodeInvalid, Message: err.Error()})
		return
	}
	var rep mesh.Report
	if rw, ok := h.agent.(ReportWaiter); ok {
		if wait > 0 {
			// Not every ResponseWriter can (a test recorder): then the
			// server's own timeout stands.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + waitSlack))
		}
		var rev uint64
		rep, rev, err = rw.WaitReport(r.Context(), after, wait)
		if err == nil {
			w.Header().Set(HeaderReportRevision, strconv.FormatUint(rev, 10))
		}
	} else {
		rep, err = h.agent.Report(r.Context())
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the caller left; nobody hears an answer
		}
		writeError(w, err)
		return
	}
	if rep.Containers == nil {
		rep.Containers = []mesh.RunningContainer{}
	}
	WriteJSON(w, http.StatusOK, rep)
}

func (h *handler) apply(w http.ResponseWriter, r *http.Request) {
	var d mesh.Declaration
	if err := decodeStrict(w, r, &d); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: Refusal{
				Code: CodeInvalid, Message: fmt.Sprintf("body exceeds %d bytes", tooBig.Limit),
			}})
			return
		}
		WriteRefusal(w, &Refusal{Code: CodeInvalid, Message: err.Error()})
		return
	}
	res, err := h.agent.Apply(r.Context(), d)
	if err != nil {
		writeError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}

// logs streams a container's output as plain text (see PathLogs). A
// refusal before the first byte is answered with its status; a failure
// once the stream has begun cuts the connection, so that the caller reads
// a stream cut short rather than one that ended.
func (h *handler) logs(w http.ResponseWriter, r *http.Request) {
	req, err := logsQuery(r)
	if err != nil {
		WriteRefusal(w, &Refusal{Code: CodeInvalid, Message: err.Error()})
		return
	}
	ls, ok := h.agent.(LogStreamer)
	if !ok {
		WriteRefusal(w, &Refusal{Code: CodeUnsupported, Message: "this host agent serves no logs"})
		return
	}
	if req.Follow {
		// A follow answers for as long as the container runs; the
		// server's write timeout is for ordinary answers.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	sw := &streamWriter{w: w, flush: req.Follow}
	err = ls.Logs(r.Context(), req, sw)
	switch {
	case err == nil:
		sw.start()
	case r.Context().Err() != nil:
		// The caller left; nobody hears an answer.
	case !sw.started:
		writeError(w, err)
	default:
		panic(http.ErrAbortHandler)
	}
}

// logsQuery reads PathLogs' parameters: module (required), tail (0 to
// MaxLogTail, default DefaultLogTail) and follow (a boolean, 1 or true).
func logsQuery(r *http.Request) (LogsRequest, error) {
	q, err := Query(r, QueryModule, QueryTail, QueryFollow)
	if err != nil {
		return LogsRequest{}, err
	}
	req := LogsRequest{Module: q[QueryModule], Tail: DefaultLogTail}
	if err := mesh.ValidName("module", req.Module); err != nil {
		return LogsRequest{}, err
	}
	if v, ok := q[QueryTail]; ok {
		if req.Tail, err = strconv.Atoi(v); err != nil || req.Tail < 0 || req.Tail > MaxLogTail {
			return LogsRequest{}, fmt.Errorf("%s=%q: want a number of lines from 0 to %d", QueryTail, v, MaxLogTail)
		}
	}
	if v, ok := q[QueryFollow]; ok {
		if req.Follow, err = strconv.ParseBool(v); err != nil {
			return LogsRequest{}, fmt.Errorf("%s=%q: want 1 or 0", QueryFollow, v)
		}
	}
	return req, nil
}

// streamWriter answers 200 text/plain at the first write or flush, and
// flushes every write of a follow so that each line leaves as it comes.
type streamWriter struct {
	w       http.ResponseWriter
	flush   bool
	started bool
}

func (s *streamWriter) start() {
	if s.started {
		return
	}
	s.started = true
	s.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	s.w.Header().Set("X-Content-Type-Options", "nosniff")
	s.w.WriteHeader(http.StatusOK)
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.start()
	n, err := s.w.Write(p)
	if err == nil && s.flush {
		err = http.NewResponseController(s.w).Flush()
	}
	return n, err
}

// Flush commits the answer and sends what is buffered (see LogStreamer).
func (s *streamWriter) Flush() {
	s.start()
	_ = http.NewResponseController(s.w).Flush()
}

// Query returns r's query parameters, each given once and each one of
// known, so that an endpoint never silently ignores a parameter it does not
// know (a misspelt one would otherwise read as absent).
func Query(r *http.Request, known ...string) (map[string]string, error) {
	out := map[string]string{}
	for k, vs := range r.URL.Query() {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("unknown query parameter %q (want %s)", k, strings.Join(known, ", "))
		}
		if len(vs) != 1 {
			return nil, fmt.Errorf("query parameter %q given %d times", k, len(vs))
		}
		out[k] = vs[0]
	}
	return out, nil
}

// decodeStrict decodes exactly one JSON value with unknown fields refused:
// a field the agent does not know is a field it would silently ignore.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode declaration: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return errors.New("decode declaration: trailing data after the JSON value")
	}
	return nil
}

// writeError answers a *Refusal with its status and anything else with 500,
// which clients treat as transient.
func writeError(w http.ResponseWriter, err error) {
	var r *Refusal
	if errors.As(err, &r) {
		WriteRefusal(w, r)
		return
	}
	WriteRefusal(w, &Refusal{Code: CodeInternal, Message: err.Error()})
}

// WriteRefusal answers a refusal with its status and the host API's error
// envelope, {"error": {...}}, so that agents' own endpoints answer as the
// contract does.
func WriteRefusal(w http.ResponseWriter, r *Refusal) {
	WriteJSON(w, r.Status(), errorBody{Error: *r})
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
