package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/liveness"
)

// PathJournal is the agent's journal, newest first, paged with ?before and
// ?limit. It is the agent's addition to the host API of package host.
const PathJournal = host.PathJournal

// HeaderRuntime names the agent's runtime on every answer, so a client (or
// an operator with curl) can tell a noop agent from one running code.
const HeaderRuntime = "Meshroll-Runtime"

// JournalPage is the journal page's wire type (see package host).
type JournalPage = host.JournalPage

// PathMetrics serves the agent's Prometheus metrics (see MetricApplies and
// the other Metric names), unauthenticated like the probes: they are
// read-only and carry no secret (digests are not counted, only outcomes).
const PathMetrics = "/metrics"

// HandlerOptions configure NewHandlerWith.
type HandlerOptions struct {
	// Token, when not empty, is required on everything but the health
	// check, the probes and the metrics.
	Token string
	// NoMetrics leaves PathMetrics unserved (404).
	NoMetrics bool
}

// NewServer is the HTTP server every process that hosts an agent uses (the
// host binary, the dev stack, the demo): its handler with timeouts that keep
// a slow or stuck client from holding the agent's connections.
func NewServer(a *Agent, token string) *http.Server {
	return NewServerWith(a, HandlerOptions{Token: token})
}

// NewServerWith is NewServer with the handler's options. Shutting the
// server down ends the logs it is following (host.PathLogs), whose answers
// would otherwise hold Shutdown for as long as their containers run.
func NewServerWith(a *Agent, o HandlerOptions) *http.Server {
	stopping := make(chan struct{})
	srv := &http.Server{
		Handler:           endFollowsOnShutdown(stopping, NewHandlerWith(a, o)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	var once sync.Once
	srv.RegisterOnShutdown(func() { once.Do(func() { close(stopping) }) })
	return srv
}

// endFollowsOnShutdown ends a logs request's context once stopping is
// closed: its answer then ends as if the caller had left.
func endFollowsOnShutdown(stopping <-chan struct{}, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != host.PathLogs {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// NewHandler serves a's host API: host.NewHandler for report, declarations
// and health, exactly as every meshroll host answers them, plus the journal,
// the metrics (PathMetrics) and the probes /livez and /readyz (ready: the
// journal is open and writable). token, when not empty, is required on
// everything but the health check, the probes and the metrics.
func NewHandler(a *Agent, token string) http.Handler {
	return NewHandlerWith(a, HandlerOptions{Token: token})
}

// NewHandlerWith is NewHandler with options.
func NewHandlerWith(a *Agent, o HandlerOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(PathJournal, host.RequireToken(o.Token, http.HandlerFunc(a.serveJournal)))
	if !o.NoMetrics {
		mux.Handle("GET "+PathMetrics, a.metricsHandler())
	}
	liveness.Mount(mux, func(context.Context) error { return a.Ready() })
	mux.Handle("/", host.NewHandler(a, o.Token))
	rt := a.Runtime()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderRuntime, rt)
		mux.ServeHTTP(w, r)
	})
}

var _ host.LogStreamer = (*Agent)(nil)

// Logs serves the host API's logs (host.LogStreamer) from the runtime: a
// module the current declaration does not name is not found (whatever its
// runtime may still have of it), and a runtime that keeps no logs is
// unsupported, each said before anything is written.
func (a *Agent) Logs(ctx context.Context, req host.LogsRequest, out io.Writer) error {
	a.mu.Lock()
	declared := a.containerLocked(req.Module) != nil
	modules := make([]string, len(a.containers))
	for i, rc := range a.containers {
		modules[i] = rc.Module
	}
	a.mu.Unlock()
	if !declared {
		runs := "nothing"
		if len(modules) > 0 {
			runs = strings.Join(modules, ", ")
		}
		return &host.Refusal{Code: host.CodeNotFound, Message: fmt.Sprintf("module %s is not declared on machine %s (it runs %s)", req.Module, a.machine, runs)}
	}
	lr, ok := a.rt.(LogReader)
	if !ok {
		return &host.Refusal{Code: host.CodeUnsupported, Message: fmt.Sprintf("runtime %s keeps no container logs", a.rt.Name())}
	}
	return lr.Logs(ctx, req.Module, req.Tail, req.Follow, out)
}

func (a *Agent) serveJournal(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		host.WriteJSON(w, http.StatusMethodNotAllowed, map[string]host.Refusal{"error": {
			Code: host.CodeInvalid, Message: r.Method + " is not allowed on " + PathJournal,
		}})
		return
	}
	before, limit, err := journalQuery(r)
	if err != nil {
		host.WriteRefusal(w, &host.Refusal{Code: host.CodeInvalid, Message: err.Error()})
		return
	}
	entries, err := a.Journal(r.Context(), before, limit)
	if err != nil {
		host.WriteRefusal(w, &host.Refusal{Code: host.CodeInternal, Message: err.Error()})
		return
	}
	page := JournalPage{Machine: a.machine, Runtime: a.Runtime(), Entries: entries}
	if n := len(entries); n > 0 && entries[n-1].Index > 1 {
		page.NextBefore = entries[n-1].Index
	}
	host.WriteJSON(w, http.StatusOK, page)
}

// journalQuery reads ?before and ?limit, refusing anything else: a parameter
// the agent does not know is one it would silently ignore.
func journalQuery(r *http.Request) (before uint64, limit int, err error) {
	q, err := host.Query(r, "before", "limit")
	if err != nil {
		return 0, 0, err
	}
	limit = DefaultJournalLimit
	if v, ok := q["before"]; ok {
		if before, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("before=%q: want a journal index (0 or more): %w", v, err)
		}
	}
	if v, ok := q["limit"]; ok {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxJournalLimit {
			return 0, 0, fmt.Errorf("limit=%q: want 1 to %d", v, MaxJournalLimit)
		}
	}
	return before, limit, nil
}
