package testsuite

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// agentHost is a real host agent (package agent, durable state in a temp
// dir, the noop runtime or the exec runtime) serving its real handler on loopback. The only
// additions are two knobs in front of it: a switch that makes it answer 503
// (a host the worker cannot use) and a counter of declarations in flight.
// Everything the tests assert about what a machine was sent is read from the
// agent's own journal.
type agentHost struct {
	t *testing.T
	// dir is the agent's state directory.
	dir         string
	a           *agent.Agent
	api         atomic.Pointer[http.Handler]
	machine     string
	token       string
	runtime     func(dir string) agent.Runtime
	srv         *httptest.Server
	down        atomic.Bool
	postsDown   atomic.Bool
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	// held, while set, makes declarations wait until it is closed (see
	// Hold); reads pass.
	held atomic.Pointer[chan struct{}]
}

func newAgentHost(t *testing.T, machine string, runtime func(dir string) agent.Runtime) *agentHost {
	t.Helper()
	return newAgentHostWithToken(t, machine, runtime, "")
}

// newAgentHostWithToken is newAgentHost with the host API requiring token
// (none when empty).
func newAgentHostWithToken(t *testing.T, machine string, runtime func(dir string) agent.Runtime, token string) *agentHost {
	t.Helper()
	h := &agentHost{t: t, machine: machine, token: token, runtime: runtime}
	h.open()
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.down.Load() || (h.postsDown.Load() && r.Method == http.MethodPost) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"host is down (test)"}}`)
			return
		}
		if c := h.held.Load(); c != nil && r.Method == http.MethodPost {
			// Held at most heldAnswer, then answered 503, so that the push
			// retries (staying in flight for its machine workflow) rather
			// than the worker's client giving up on a request the host
			// still holds, and a retry overlapping it once both go.
			select {
			case <-*c:
			case <-time.After(heldAnswer):
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"declarations held (test)"}}`)
				return
			case <-r.Context().Done():
				return
			}
		}
		if r.Method == http.MethodPost {
			n := h.inFlight.Add(1)
			defer h.inFlight.Add(-1)
			for m := h.maxInFlight.Load(); n > m && !h.maxInFlight.CompareAndSwap(m, n); m = h.maxInFlight.Load() {
			}
		}
		(*h.api.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		h.srv.Close()
		require.NoError(t, h.a.Close(context.Background()))
	})
	return h
}

// open starts an agent on a new, empty state directory and serves it.
func (h *agentHost) open() {
	h.t.Helper()
	h.openOn(h.t.TempDir())
}

// restart stops the agent cleanly, as a service manager does for an
// upgrade, and starts a new one on the same state directory, at the same
// address.
func (h *agentHost) restart() {
	h.t.Helper()
	require.NoError(h.t, h.a.Close(context.Background()))
	h.openOn(h.dir)
}

// openOn starts an agent on dir and serves it.
func (h *agentHost) openOn(dir string) {
	h.t.Helper()
	a, err := agent.Open(context.Background(), agent.Options{
		Machine:  h.machine,
		StateDir: dir,
		Runtime:  h.runtime(dir),
		Log:      zerolog.Nop(),
	})
	require.NoError(h.t, err)
	api := agent.NewHandler(a, h.token)
	h.a, h.dir = a, dir
	h.api.Store(&api)
}

// forget replaces the agent with one that has lost its state, at the same
// address, as a machine whose disk was replaced, or that was re-imaged,
// comes back: nothing running, no journal, no floor, sequence 0.
func (h *agentHost) forget() {
	h.t.Helper()
	require.NoError(h.t, h.a.Close(context.Background()))
	h.open()
}

// heldAnswer is how long a held declaration waits before it is answered
// 503: well within the worker's host client timeout (host.DefaultTimeout)
// on a loaded machine.
const heldAnswer = host.DefaultTimeout / 2

// Hold makes every declaration sent to the host wait until release is
// called (reads are answered), each answered 503 after heldAnswer and
// retried: a push that stays in flight as long as a test needs, while
// requests queue behind it.
func (h *agentHost) Hold() (release func()) {
	c := make(chan struct{})
	h.held.Store(&c)
	return func() {
		h.held.Store(nil)
		close(c)
	}
}

func (h *agentHost) URL() string { return h.srv.URL }

// SetDown makes the host unreachable for the worker (503 on everything).
func (h *agentHost) SetDown(down bool) { h.down.Store(down) }

// SetPostsDown makes the host answer 503 to declarations only: it reports
// what it runs, so a plan composes for it, but every push to it fails.
func (h *agentHost) SetPostsDown(down bool) { h.postsDown.Store(down) }

// MaxInFlight is the most declarations ever being handled at once.
func (h *agentHost) MaxInFlight() int { return int(h.maxInFlight.Load()) }

// Report is the agent's report.
func (h *agentHost) Report() mesh.Report {
	h.t.Helper()
	rep, err := h.a.Report(context.Background())
	require.NoError(h.t, err)
	return rep
}

// journal is the agent's whole journal, oldest first.
func (h *agentHost) journal() []agent.Entry {
	h.t.Helper()
	var all []agent.Entry
	var before uint64
	for {
		page, err := h.a.Journal(context.Background(), before, agent.MaxJournalLimit)
		require.NoError(h.t, err)
		all = append(all, page...)
		if len(page) == 0 || page[len(page)-1].Index <= 1 {
			break
		}
		before = page[len(page)-1].Index
	}
	slices.Reverse(all)
	return all
}

// Received is every declaration the agent judged (applied, repeated or
// refused), in order, from its journal.
func (h *agentHost) Received() []mesh.Declaration {
	return h.declarations(agent.OutcomeApplied, agent.OutcomeRepeat, agent.OutcomeRefused)
}

// Applied is every declaration the agent applied, in order, from its journal.
func (h *agentHost) Applied() []mesh.Declaration { return h.declarations(agent.OutcomeApplied) }

func (h *agentHost) declarations(outcomes ...string) []mesh.Declaration {
	var ds []mesh.Declaration
	for _, e := range h.journal() {
		if slices.Contains(outcomes, e.Outcome) {
			ds = append(ds, mesh.Declaration{Machine: e.Machine, Seq: e.Seq, Plan: e.Plan, Request: e.Request, Force: e.Force,
				Revert: e.Revert, Rollback: e.Rollback, Reason: e.Reason, Containers: e.Containers})
		}
	}
	return ds
}
