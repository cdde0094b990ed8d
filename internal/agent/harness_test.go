package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

const (
	testMachine = "edge-1"
	testToken   = "t0ken"
	// waitLimit only bounds a wait that would otherwise hang a broken test;
	// no test sleeps to synchronise.
	waitLimit = 10 * time.Second
)

// gate holds the noop runtime's starts until a test releases them, one
// release per start of a module.
type gate struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (g *gate) chanFor(module string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(map[string]chan struct{})
	}
	c, ok := g.ch[module]
	if !ok {
		c = make(chan struct{}, 16)
		g.ch[module] = c
	}
	return c
}

func (g *gate) wait(ctx context.Context, c mesh.Container) error {
	select {
	case <-g.chanFor(c.Module):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) release(module string) { g.chanFor(module) <- struct{}{} }

// served is an agent served over httptest like the real binary serves
// it, with a client of it.
type served struct {
	t   *testing.T
	a   *Agent
	srv *httptest.Server
	c   *host.HTTPClient
}

// serve serves a, asking token, until close.
func (s *served) serve(a *Agent, token string) {
	s.t.Helper()
	s.a = a
	s.srv = httptest.NewServer(NewHandler(a, token))
	var err error
	s.c, err = host.NewHTTPClient(s.srv.URL, token, nil)
	require.NoError(s.t, err)
	s.t.Cleanup(s.close)
}

func (s *served) close() {
	if s.a == nil {
		return
	}
	s.srv.Close()
	require.NoError(s.t, s.a.Close(context.Background()))
	s.a = nil
}

// harness is an agent on a state directory, served, with the test hooks
// wired.
type harness struct {
	served
	dir     string
	held    bool
	token   string
	clock   clock
	gate    *gate
	updates chan Update
	crash   atomic.Value // string: the point to crash at next, "" for none
	log     *strings.Builder
	logMu   *sync.Mutex
}

type harnessOpt func(*harness)

// held makes container starts wait for gate releases.
func held(h *harness) { h.held = true }

func withToken(tok string) harnessOpt { return func(h *harness) { h.token = tok } }

// withClock judges health by c instead of the wall clock.
func withClock(c clock) harnessOpt { return func(h *harness) { h.clock = c } }

func newHarness(t *testing.T, dir string, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{served: served{t: t}, dir: dir, log: &strings.Builder{}, logMu: &sync.Mutex{}}
	for _, o := range opts {
		o(h)
	}
	h.open()
	return h
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (h *harness) open() {
	h.t.Helper()
	h.gate = &gate{}
	h.updates = make(chan Update, 1024)
	h.crash.Store("")
	rt := NewNoopRuntime(0)
	if h.held {
		rt.gate = h.gate.wait
	}
	a, err := Open(context.Background(), Options{
		Machine:  testMachine,
		StateDir: h.dir,
		Runtime:  rt,
		Log:      zerolog.New(syncWriter{h.logMu, h.log}),
		crash:    func(p string) bool { return h.crash.CompareAndSwap(p, "") },
		observed: func(u Update) { h.updates <- u },
		clock:    h.clock,
	})
	require.NoError(h.t, err)
	h.serve(a, h.token)
}

// restart stops the agent and opens a new one on the same directory, as a
// restarted process would.
func (h *harness) restart() {
	h.t.Helper()
	h.close()
	h.open()
}

// crashAt makes the agent stop, as killed, at point the next time it gets
// there.
func (h *harness) crashAt(point string) { h.crash.Store(point) }

// waitState waits until the agent reports module in state. Every update the
// agent takes in wakes it to look again, and the agent has changed its state
// before the update is signalled, so no change is missed.
func (h *harness) waitState(module, state string) {
	h.t.Helper()
	timeout := time.NewTimer(waitLimit)
	defer timeout.Stop()
	for {
		h.a.mu.Lock()
		cur := ""
		for _, rc := range h.a.containers {
			if rc.Module == module {
				cur = rc.State
			}
		}
		h.a.mu.Unlock()
		if cur == state {
			return
		}
		select {
		case <-h.updates:
		case <-timeout.C:
			h.t.Fatalf("%s never reached %s (it is %q)", module, state, cur)
		}
	}
}

// run releases module's start and waits until it runs.
func (h *harness) run(module string) {
	h.t.Helper()
	h.gate.release(module)
	h.waitState(module, mesh.StateRunning)
}

func (h *harness) apply(d mesh.Declaration) (host.ApplyResult, error) {
	h.t.Helper()
	return h.c.Apply(context.Background(), d)
}

func (h *harness) mustApply(d mesh.Declaration) host.ApplyResult {
	h.t.Helper()
	res, err := h.apply(d)
	require.NoError(h.t, err)
	return res
}

func (h *harness) report() mesh.Report {
	h.t.Helper()
	rep, err := h.c.Report(context.Background())
	require.NoError(h.t, err)
	return rep
}

func (h *harness) floor(module string) (host.Mark, bool) { return floorOf(h.a, module) }

// journal reads the whole journal through the agent, newest first.
func (h *harness) journal() []Entry {
	h.t.Helper()
	return journalOf(h.t, h.a)
}

// floorOf is a's floor for module.
func floorOf(a *Agent, module string) (host.Mark, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.ledger.Floor[module]
	return m, ok
}

// journalOf reads a's whole journal, newest first.
func journalOf(t *testing.T, a *Agent) []Entry {
	t.Helper()
	es, err := a.Journal(context.Background(), 0, MaxJournalLimit)
	require.NoError(t, err)
	return es
}

// getJournal reads a page over HTTP.
func (h *served) getJournal(query, token string) (int, JournalPage, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+PathJournal+query, nil)
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	var p JournalPage
	if resp.StatusCode == http.StatusOK {
		require.NoError(h.t, json.Unmarshal(b, &p), string(b))
	}
	return resp.StatusCode, p, string(b)
}

// requireRefused requires err to be the agent's refusal with code and
// returns it.
func requireRefused(t *testing.T, err error, code string, msgAndArgs ...any) *host.RefusedError {
	t.Helper()
	r, ok := host.IsRefused(err)
	require.True(t, ok, "want a %s refusal, got %v", code, err)
	require.Equal(t, code, r.Code, msgAndArgs...)
	return r
}

func digest(n int) string { return fmt.Sprintf("sha256:%064x", n) }

func ctr(module string, gen int64) mesh.Container {
	return mesh.Container{Module: module, Digest: digest(int(gen)*1000 + len(module)), Generation: gen}
}

func decl(seq uint64, cs ...mesh.Container) mesh.Declaration {
	return mesh.Declaration{
		Machine: testMachine, Seq: seq,
		Plan:       fmt.Sprintf("plan/web/%040x", seq),
		Request:    fmt.Sprintf("plan/web/%040x@%s", seq, testMachine),
		Containers: cs,
	}
}

// outcomes lists the journal's (outcome, seq) pairs, newest first.
func outcomes(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s %d", e.Outcome, e.Seq)
		if e.Code != "" {
			out[i] += " " + e.Code
		}
	}
	return out
}
