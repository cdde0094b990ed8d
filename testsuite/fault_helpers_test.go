package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// The fault suite's knobs, like the race suite's: test-binary flags that
// default to environment variables.
//
//	go test -count=1 -run 'TestFault' -v ./testsuite -args -fault.seed=1234
//	go test -count=1 -run 'TestFaultWorkerKilled' -v -timeout 60m ./testsuite -args -fault.soak
var (
	faultSeed = flag.Int64("fault.seed", envInt64("MESHROLL_FAULT_SEED", 0), "fault suite: seed of the random kill points (0: time-based); env MESHROLL_FAULT_SEED")
	faultSoak = flag.Bool("fault.soak", envBool("MESHROLL_FAULT_SOAK"), "fault suite: the long run (more kills and rounds); env MESHROLL_FAULT_SOAK")
)

// faultSeedFor returns the seed to use and logs it with the command that
// reproduces the run.
func faultSeedFor(t *testing.T) int64 {
	t.Helper()
	seed := *faultSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	soak := ""
	if *faultSoak {
		soak = " -fault.soak"
	}
	repro := fmt.Sprintf("go test -count=1 -run '^%s$' -v ./testsuite -args -fault.seed=%d%s", t.Name(), seed, soak)
	t.Logf("fault seed %d (reproduce: %s)", seed, repro)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with fault seed %d: %s", seed, repro)
		}
	})
	return seed
}

// proxyEvent is what a faultProxy shows its hook: a request about to be
// forwarded (answer nil), or a declaration's answer from the agent about to
// be relayed.
type proxyEvent struct {
	// N counts the requests this proxy has seen, from 1.
	N      int64
	Method string
	Path   string
	// Decl is the declaration of a POST to the declarations path.
	Decl *mesh.Declaration
	// Status is the agent's answer, on the answer event.
	Status int
	Answer bool
}

// proxyAction is what the hook wants done.
type proxyAction int

const (
	// relay forwards (or, on an answer, passes the answer on).
	relay proxyAction = iota
	// drop cuts the connection without a word: on a request, the agent
	// never sees it; on an answer, the agent has acted and the caller never
	// hears so.
	drop
)

// faultProxy is a small HTTP proxy in front of a real host agent, on an
// address that stays the same while the agent behind it is killed and
// started again elsewhere. A hook sees every request before it is forwarded
// and every declaration's answer before it is relayed, and may block there
// (a stall) or drop it; the hook runs on the request's goroutine.
type faultProxy struct {
	t       *testing.T
	ln      net.Listener
	srv     *http.Server
	backend atomic.Pointer[string]
	hc      *http.Client
	n       atomic.Int64

	mu   sync.Mutex
	hook func(proxyEvent) proxyAction
}

func newFaultProxy(t *testing.T, backend string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{t: t, ln: ln, hc: &http.Client{Timeout: time.Minute}}
	p.setBackend(backend)
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

// URL is what the worker's config names as the machine's host.
func (p *faultProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *faultProxy) setBackend(url string) { p.backend.Store(&url) }

// setHook replaces the hook (nil: relay everything).
func (p *faultProxy) setHook(h func(proxyEvent) proxyAction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = h
}

func (p *faultProxy) call(ev proxyEvent) proxyAction {
	p.mu.Lock()
	h := p.hook
	p.mu.Unlock()
	if h == nil {
		return relay
	}
	return h(ev)
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, host.MaxBodyBytes+1))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	ev := proxyEvent{N: p.n.Add(1), Method: r.Method, Path: r.URL.Path}
	if r.Method == http.MethodPost && r.URL.Path == host.PathDeclarations {
		var d mesh.Declaration
		if json.Unmarshal(body, &d) == nil {
			ev.Decl = &d
		}
	}
	if p.call(ev) == drop {
		panic(http.ErrAbortHandler)
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, *p.backend.Load()+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		host.WriteRefusal(w, &host.Refusal{Code: host.CodeInternal, Message: "fault proxy: " + err.Error()})
		return
	}
	for _, k := range []string{"Authorization", "Content-Type", "Accept"} {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		host.WriteRefusal(w, &host.Refusal{Code: host.CodeInternal, Message: "fault proxy: agent unreachable: " + err.Error()})
		return
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if ev.Decl != nil {
		ev.Answer, ev.Status = true, resp.StatusCode
		if p.call(ev) == drop {
			panic(http.ErrAbortHandler)
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// workerProc is the real worker binary, run as its own process with a
// config file, the way a deployment runs it; the fault tests SIGKILL it.
type workerProc struct {
	t   *testing.T
	cmd *exec.Cmd
	// done is closed when the process has exited.
	done chan struct{}
}

// faultWorkers runs worker processes one after the other on one config,
// keeping every process's log for the failure report.
type faultWorkers struct {
	t       *testing.T
	bin     string
	config  string
	log     *dsBuffer
	started int
	cur     *workerProc
	// all is every process started, for the cleanup.
	all []*workerProc
}

func newFaultWorkers(t *testing.T, bin, config string) *faultWorkers {
	t.Helper()
	fw := &faultWorkers{t: t, bin: bin, config: config, log: &dsBuffer{}}
	t.Cleanup(func() {
		for _, w := range fw.all {
			_ = w.cmd.Process.Signal(syscall.SIGCONT) // one a test froze
			w.stop()
		}
		if t.Failed() {
			t.Logf("worker processes' logs (last lines):\n%s", dsLastLines(fw.log.String(), 80))
		}
	})
	return fw
}

// start runs a new worker process and waits until it says it started.
func (fw *faultWorkers) start() *workerProc {
	fw.t.Helper()
	require.True(fw.t, fw.cur == nil || fw.cur.exited(), "a worker process still runs")
	return fw.startAlongside()
}

// startAlongside runs a new worker process whether or not another one
// runs (or is frozen), and waits until it says it started.
func (fw *faultWorkers) startAlongside() *workerProc {
	fw.t.Helper()
	fw.started++
	fmt.Fprintf(fw.log, "--- worker process %d ---\n", fw.started)
	mark := len(fw.log.String())
	w := &workerProc{t: fw.t, done: make(chan struct{})}
	w.cmd = exec.Command(fw.bin, "--config", fw.config, "--log-format", "json", "--log-level", "info")
	w.cmd.Env = dsEnv("")
	w.cmd.Stdout, w.cmd.Stderr = fw.log, fw.log
	require.NoError(fw.t, w.cmd.Start())
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	fw.cur = w
	fw.all = append(fw.all, w)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(fw.log.String()[mark:], `"message":"worker started"`) {
		if w.exited() {
			fw.t.Fatalf("worker process %d exited before it started:\n%s", fw.started, dsLastLines(fw.log.String(), 30))
		}
		require.True(fw.t, time.Now().Before(deadline), "worker process %d did not log \"worker started\" within 2 minutes", fw.started)
		time.Sleep(20 * time.Millisecond) // polling the log, not waiting for an outcome
	}
	return w
}

// kill SIGKILLs the running worker process and waits until it is gone.
func (fw *faultWorkers) kill() {
	fw.t.Helper()
	if fw.cur == nil {
		return
	}
	fw.cur.kill()
	fmt.Fprintf(fw.log, "--- worker process %d SIGKILLed ---\n", fw.started)
}

func (w *workerProc) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *workerProc) kill() {
	if !w.exited() {
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
	}
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		w.t.Errorf("worker process %d did not exit within a minute of SIGKILL", w.cmd.Process.Pid)
	}
}

// stop interrupts the worker (as at the end of a test) and waits.
func (w *workerProc) stop() {
	stopGently(w.cmd.Process, w.done, os.Interrupt)
}

// planState reads a plan's state, or fails the test.
func (s *stack) planState(id string) meshapi.PlanState {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := plans.State(ctx, s.c, id)
	require.NoError(s.t, err, "state of %s", id)
	return st
}

// faultTally is what the journals say about one machine: declarations
// applied, applied more than once (by request), sequences not above the
// previous apply's, and containers whose generation went down.
type faultTally struct {
	applied, doubles, badSeqs, downgrades int
}

func (a *faultTally) add(b faultTally) {
	a.applied += b.applied
	a.doubles += b.doubles
	a.badSeqs += b.badSeqs
	a.downgrades += b.downgrades
}

// tallyJournal reads a machine's journal (oldest first) and reports each
// breach as a test error as well as counting it.
func tallyJournal(t *testing.T, machine string, entries []agent.Entry) faultTally {
	t.Helper()
	var tl faultTally
	byRequest := map[string]uint64{}
	high := map[string]int64{}
	var last uint64
	for _, e := range entries {
		switch e.Outcome {
		case agent.OutcomeApplied:
			tl.applied++
			if prev, ok := byRequest[e.Request]; ok {
				tl.doubles++
				t.Errorf("%s: request %s applied twice (seq %d, then seq %d)", machine, e.Request, prev, e.Seq)
			}
			byRequest[e.Request] = e.Seq
			if e.Seq <= last {
				tl.badSeqs++
				t.Errorf("%s: seq %d applied after seq %d", machine, e.Seq, last)
			}
			last = e.Seq
		case agent.OutcomeRunning:
		default:
			continue
		}
		for _, c := range e.Containers {
			if c.Generation < high[c.Module] {
				tl.downgrades++
				t.Errorf("%s: journal entry %d (%s, seq %d, plan %s): %s generation %d after %d",
					machine, e.Index, e.Outcome, e.Seq, e.Plan, c.Module, c.Generation, high[c.Module])
			}
			high[c.Module] = max(high[c.Module], c.Generation)
		}
	}
	return tl
}

// journalOver reads an agent's whole journal over its HTTP API, oldest
// first.
func journalOver(t *testing.T, c *host.HTTPClient) []agent.Entry {
	t.Helper()
	var all []agent.Entry
	for before := uint64(0); ; {
		pg, err := c.Journal(context.Background(), before, agent.MaxJournalLimit)
		require.NoError(t, err)
		all = append(all, pg.Entries...)
		if pg.NextBefore == 0 {
			break
		}
		before = pg.NextBefore
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all
}

// runsBuild asserts from the machine's own report that it runs b's digest
// of b's module.
func runsBuild(t *testing.T, machine string, rep mesh.Report, b mesh.Build) {
	t.Helper()
	r, ok := rep.Running(b.Module)
	require.True(t, ok, "%s runs no %s", machine, b.Module)
	require.Equal(t, b.Digest, r.Digest, "%s runs %s generation %d, want %d", machine, b.Module, r.Generation, b.Generation)
	require.Equal(t, mesh.StateRunning, r.State, "%s's %s", machine, b.Module)
}
