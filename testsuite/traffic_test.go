package testsuite

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// requestsServerSource is a build of an example module that does what the
// analysis issue's fleet does and a health probe cannot see: it serves
// GET /healthz (always 200, so a bad build passes its probe), GET /work
// (500 to a fraction of requests fixed at build time, 200 to the rest) and
// GET /metrics (http_requests_total by code, in Prometheus' text format,
// written by hand), all on $MESHROLL_PORT. Its arguments are its version
// and its errors per thousand /work requests; see requestsServer.
const requestsServerSource = `package main

import (
	"fmt"
	"net/http"
	"os"
	"sync"
)

func main() {
	fmt.Println(%q)
	if len(os.Args) > 1 && os.Args[1] == "version" {
		return
	}
	const errorsPerThousand = %d
	var (
		mu          sync.Mutex
		n, ok, fail int64
	)
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/work", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		// Exactly errorsPerThousand of every thousand requests fail,
		// spread evenly: the n-th fails when n*rate/1000 steps up.
		code := http.StatusOK
		if n*errorsPerThousand/1000 > (n-1)*errorsPerThousand/1000 {
			code = http.StatusInternalServerError
			fail++
		} else {
			ok++
		}
		mu.Unlock()
		w.WriteHeader(code)
		fmt.Fprintln(w, http.StatusText(code))
	})
	http.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		o, f := ok, fail
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP http_requests_total Requests to /work, by status code.\n# TYPE http_requests_total counter\n")
		fmt.Fprintf(w, "http_requests_total{code=\"200\"} %%d\nhttp_requests_total{code=\"500\"} %%d\n", o, f)
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("MESHROLL_PORT"), nil); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
`

// requestsServer is requestsServerSource for a build printing version that
// answers 500 to errorRate of its /work requests (0 for a good build, 0.3
// for a bad one), for s.commitSource.
func requestsServer(version string, errorRate float64) string {
	return fmt.Sprintf(requestsServerSource, version, int(errorRate*1000+0.5))
}

// requestsServerHealth is the health key a requestsServer module needs: an
// http probe on the port the agent picks ($MESHROLL_PORT), which /work and
// /metrics are served on too. Its deadline is generous: no test here
// waits it out, and a box busy with four suites at once once took 20 s to
// see a new build's first healthy probe.
const requestsServerHealth = "{http: {port: auto, path: /healthz}, interval: 200ms, min_healthy: 1s, deadline: 60s}"

// trafficTarget is one machine's container of the module, as its host
// reports it running, and the loopback port its agent picked for it.
type trafficTarget struct {
	Machine    string
	Generation int64
	Digest     string
	// Seq is the declaration that last named the container: a new one may
	// have given it a new port.
	Seq  uint64
	Port int
}

// fleetTraffic is a module's callers and its service discovery, on a
// stack's real host agents: while it runs it sends steady requests (20 a
// second) to /work of the module's container on every machine, and keeps
// a Prometheus server's targets in step with what each machine's host
// reports running, labelled module, machine and generation (the labels a
// fleet's discovery gives its series, and that the analysis queries
// select a build by). It stops when the test ends.
type fleetTraffic struct {
	t      *testing.T
	prom   *promServer
	module string
	hc     *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	targets map[string]trafficTarget // by machine
	// answers counts /work answers by generation and status code (0: no
	// answer).
	answers map[int64]map[int]int
	// errs is the last error discovery met, by machine, for a failure's
	// log.
	errs map[string]string
}

// trafficRate is how many /work requests a second each container gets.
const trafficRate = 20

// startTraffic starts a fleetTraffic for module on every machine of s
// (the stack's own host agents: run it after newStack), feeding prom.
func (s *stack) startTraffic(prom *promServer, module string) *fleetTraffic {
	s.t.Helper()
	hosts := map[string]*host.HTTPClient{}
	for machine, h := range s.hosts {
		c, err := host.NewHTTPClient(h.URL(), h.token, nil)
		require.NoError(s.t, err)
		hosts[machine] = c
	}
	return startTraffic(s.t, prom, module, hosts)
}

// startTraffic starts a fleetTraffic for module on the machines whose host
// agents hosts reach (by machine), feeding prom; it stops when t ends. On
// a stack with faults, give it clients of the machines' proxies
// (fs.proxies[m].URL()): they stay where they are while a host process is
// killed and started again (healthFault's), and discovery follows.
func startTraffic(t *testing.T, prom *promServer, module string, hosts map[string]*host.HTTPClient) *fleetTraffic {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ft := &fleetTraffic{
		t: t, prom: prom, module: module, cancel: cancel,
		hc:      &http.Client{Timeout: time.Second},
		targets: map[string]trafficTarget{}, answers: map[int64]map[int]int{}, errs: map[string]string{},
	}
	require.NoError(t, prom.SetTargets(nil))
	for machine, c := range hosts {
		ft.wg.Add(1)
		go func() { defer ft.wg.Done(); ft.discover(ctx, machine, c) }()
	}
	ft.wg.Add(1)
	go func() { defer ft.wg.Done(); ft.send(ctx) }()
	t.Cleanup(func() {
		ft.Stop()
		if t.Failed() {
			ft.mu.Lock()
			defer ft.mu.Unlock()
			t.Logf("traffic to %s: targets %v, answers by generation and code %v, last discovery errors %v", module, ft.targets, ft.answers, ft.errs)
		}
	})
	return ft
}

// Stop stops the callers and the discovery and returns once they have
// stopped; the targets file keeps what it last listed.
func (ft *fleetTraffic) Stop() {
	ft.cancel()
	ft.wg.Wait()
}

// discover follows machine's report (long-polling it) and keeps its
// target in step: the module's container while it runs, none otherwise.
func (ft *fleetTraffic) discover(ctx context.Context, machine string, c *host.HTTPClient) {
	var after uint64
	var last trafficTarget // what the port was read for
	for ctx.Err() == nil {
		rep, rev, err := c.WaitReport(ctx, after, 5*time.Second)
		if err == nil {
			after = rev
			last, err = ft.observe(ctx, machine, c, rep, last)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			ft.mu.Lock()
			ft.errs[machine] = err.Error()
			ft.mu.Unlock()
		}
		if err != nil || rev == 0 {
			// An error, or a host that does not long-poll: try again
			// shortly rather than spin.
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// observe sets machine's target from its report, reading the container's
// port from the journal when the container is not the one it was read for
// (prev), and returns the target it read.
func (ft *fleetTraffic) observe(ctx context.Context, machine string, c *host.HTTPClient, rep mesh.Report, prev trafficTarget) (trafficTarget, error) {
	rc, ok := rep.Running(ft.module)
	if !ok || rc.State != mesh.StateRunning {
		return trafficTarget{}, ft.set(machine, nil)
	}
	cur := trafficTarget{Machine: machine, Generation: rc.Generation, Digest: rc.Digest, Seq: rc.Seq, Port: prev.Port}
	if prev.Digest != rc.Digest || prev.Seq != rc.Seq || prev.Port == 0 {
		port, err := ft.portOf(ctx, c)
		if err != nil {
			return prev, err
		}
		cur.Port = port
	}
	if cur.Port == 0 {
		return trafficTarget{}, ft.set(machine, nil)
	}
	return cur, ft.set(machine, &cur)
}

// portOf is the loopback port the agent picked for the module's container
// (mesh.PortAuto): the report keeps the probe as declared, and the journal
// names the port, in the newest entry naming one for the module (a
// container keeps its port while it is declared unchanged). 0 when none.
func (ft *fleetTraffic) portOf(ctx context.Context, c *host.HTTPClient) (int, error) {
	var before uint64
	for range 4 { // the newest few hundred entries: the current container's are among them
		page, err := c.Journal(ctx, before, 100)
		if err != nil {
			return 0, fmt.Errorf("port of %s: %w", ft.module, err)
		}
		for _, e := range page.Entries {
			if p := e.Ports[ft.module]; p != 0 {
				return p, nil
			}
		}
		if page.NextBefore == 0 {
			break
		}
		before = page.NextBefore
	}
	return 0, nil
}

// set replaces machine's target (nil: none) and, when that changes the
// set, rewrites Prometheus' targets file.
func (ft *fleetTraffic) set(machine string, tg *trafficTarget) error {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	old, had := ft.targets[machine]
	switch {
	case tg == nil && !had, tg != nil && had && old == *tg:
		return nil
	case tg == nil:
		delete(ft.targets, machine)
	default:
		ft.targets[machine] = *tg
	}
	var ts []promTarget
	for _, m := range slices.Sorted(maps.Keys(ft.targets)) {
		tg := ft.targets[m]
		ts = append(ts, promTarget{
			Targets: []string{"127.0.0.1:" + strconv.Itoa(tg.Port)},
			Labels:  map[string]string{"module": ft.module, "machine": m, "generation": strconv.FormatInt(tg.Generation, 10)},
		})
	}
	return ft.prom.SetTargets(ts)
}

// send calls /work of every target trafficRate times a second until ctx
// ends, counting the answers.
func (ft *fleetTraffic) send(ctx context.Context) {
	tick := time.NewTicker(time.Second / trafficRate)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ft.mu.Lock()
		ts := make([]trafficTarget, 0, len(ft.targets))
		for _, tg := range ft.targets {
			ts = append(ts, tg)
		}
		ft.mu.Unlock()
		for _, tg := range ts {
			code := ft.call(ctx, tg)
			ft.mu.Lock()
			if ft.answers[tg.Generation] == nil {
				ft.answers[tg.Generation] = map[int]int{}
			}
			ft.answers[tg.Generation][code]++
			ft.mu.Unlock()
		}
	}
}

// call sends one GET /work and returns the answer's status, 0 for none.
func (ft *fleetTraffic) call(ctx context.Context, tg trafficTarget) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(tg.Port)+"/work", nil)
	if err != nil {
		return 0
	}
	resp, err := ft.hc.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// Targets is the machines' targets now, by machine.
func (ft *fleetTraffic) Targets() map[string]trafficTarget {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	out := make(map[string]trafficTarget, len(ft.targets))
	for m, tg := range ft.targets {
		out[m] = tg
	}
	return out
}

// Answers is how many /work answers the callers had from generation's
// containers, by status code (0: no answer), as the callers saw them.
func (ft *fleetTraffic) Answers(generation int64) map[int]int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	out := map[int]int{}
	for code, n := range ft.answers[generation] {
		out[code] = n
	}
	return out
}

// waitTargets waits (up to a minute) until every machine named has the
// module's container of generation as its target.
func (ft *fleetTraffic) waitTargets(generation int64, machines ...string) {
	ft.t.Helper()
	eventually(ft.t, time.Minute, fmt.Sprintf("targets of %s generation %d on %s", ft.module, generation, strings.Join(machines, ", ")), func() bool {
		ts := ft.Targets()
		for _, m := range machines {
			if ts[m].Generation != generation {
				return false
			}
		}
		return true
	})
}
