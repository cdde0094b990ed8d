package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/prodserver"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// The production topology, run natively: the real Temporal server (not the
// dev server) on a real PostgreSQL, configured as the compose file's
// temporal service (the temporalio/server image's config template and the
// service's environment), its schema set up by temporal-sql-tool through
// deploy/temporal/setup-schema.sh, the namespace registered by
// deploy/temporal/create-namespace.sh, an OCI registry of its own, a PostgreSQL
// catalogue, a host agent per machine as real `host` processes, and two
// `worker` processes, all configured by deploy/compose-mesh.yaml (the file
// docker-compose.yml mounts) with loopback addresses given as MESHROLL_*
// variables. A merge converges; then a second merge, during which the
// worker running a push is SIGKILLed, is finished by the other worker, and
// every host's journal shows each declaration applied once.
//
// It needs scripts/install-temporal-server.sh (the server and its SQL tool)
// and MESHROLL_TEST_POSTGRES_DSN (scripts/postgres-test.sh). Without them,
// or with -short or MESHROLL_SKIP_PRODUCTION=1, it skips locally; with CI
// set it fails instead.
func TestProductionTopology(t *testing.T) {
	t.Parallel()
	p := newProdStack(t)
	p.startTemporal()
	p.registerNamespace()
	p.startRegistry()
	for _, machine := range p.cfg.MachineNames() {
		p.startHost(machine)
	}
	a, b := p.startWorker("worker-a"), p.startWorker("worker-b")
	p.checkCatalogue(0)

	// The first merge converges through the starter, as CI would run it.
	c1 := p.mesh.commitHost(t)
	out := p.starter("merge", "--module", "host", "--commit", c1, "--wait", "--output", "json")
	var merged struct{ Plan, State string }
	require.NoError(t, json.Unmarshal([]byte(out), &merged), out)
	require.Equal(t, meshapi.PlanID("host", c1), merged.Plan)
	require.Equal(t, string(meshapi.PlanConverged), merged.State, out)
	d1 := p.planDigest(merged.Plan)
	for _, machine := range p.cfg.MachineNames() {
		require.Equal(t, d1, p.running(machine, "host"), "%s runs the first merge's build", machine)
	}
	// The overviews' list of the mesh's machine workflows (by workflow
	// type, status and task queue) works on PostgreSQL visibility too.
	eventually(t, 30*time.Second, "the mesh's machine workflows listed from PostgreSQL visibility", func() bool {
		sums, err := plans.MachineSummaries(t.Context(), p.c, prodNamespace, p.cfg.Temporal.TaskQueue)
		require.NoError(t, err)
		return len(sums.ByMachine) == len(p.cfg.Machines)
	})
	// deploy/'s dynamic config turns eager activity dispatch on: the
	// server counts the pushes it handed out eagerly.
	eager := p.serverCounter("activity_eager_execution")
	require.Positive(t, eager, "the server dispatched no activity eagerly: is system.enableActivityEagerExecution on in deploy/temporal/dynamicconfig.yaml?")
	t.Logf("server: %v activities dispatched eagerly", eager)

	// The second merge: once a push is in flight on one worker, that worker
	// is killed; the other picks the push up (after the heartbeat timeout)
	// and the plan converges.
	c2 := p.mesh.commitHost(t)
	id2 := meshapi.PlanID("host", c2)
	p.starter("merge", "--module", "host", "--commit", c2)
	victim, machine := p.waitForPushInFlight(id2, a, b)
	t.Logf("SIGKILL %s (pid %d) while it pushes %s to %s", victim.name, victim.cmd.Process.Pid, id2, machine)
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	<-victim.done
	var exit *exec.ExitError
	require.ErrorAs(t, victim.err, &exit, "%s was killed", victim.name)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())

	killed := time.Now()
	final := p.waitPlan(id2, 4*time.Minute)
	require.Equal(t, meshapi.PlanConverged, final.State, "%s: %s", id2, final.Reason)
	t.Logf("%s converged %v after the kill", id2, time.Since(killed).Round(time.Millisecond))
	survivor := a
	if victim == a {
		survivor = b
	}
	select {
	case <-survivor.done:
		t.Fatalf("%s exited too (%v)", survivor.name, survivor.err)
	default:
	}
	require.Equal(t, http.StatusOK, survivor.ready(), "%s is still ready", survivor.name)
	// The push the victim was running was retried, and finished, on the
	// survivor: the machine workflow's history has it started again there.
	attempt := p.pushRetriedOn(machine, survivor)
	t.Logf("%s's push was finished by %s on attempt %d", machine, survivor.name, attempt)
	require.NotNil(t, final.Build)
	d2 := final.Build.Digest
	require.NotEqual(t, d1, d2)
	for _, m := range p.cfg.MachineNames() {
		require.Equal(t, d2, p.running(m, "host"), "%s runs the second merge's build after the worker was killed", m)
	}
	// Nothing was applied twice: each host journalled every sequence it
	// applied once, in order, never lowering a generation, and took each
	// plan's declaration once.
	repeats := 0
	for _, m := range p.cfg.MachineNames() {
		repeats += p.checkJournal(m, merged.Plan, id2)
	}
	t.Logf("journals: one apply per plan per machine; %d repeated declarations acknowledged without applying", repeats)
	p.checkCatalogue(2)
}

const (
	prodSkipEnv     = "MESHROLL_SKIP_PRODUCTION"
	prodPostgresEnv = prodserver.PostgresEnv
	prodNamespace   = "meshroll"
	prodToken       = "production-test-token"
	// prodCatalogue is the catalogue's database among the server's
	// (prodserver.Options.ExtraDatabases).
	prodCatalogue = "catalogue"
)

// prodSkip skips the test locally and fails it in CI, where a skipped
// production test would pass for a tested one.
func prodSkip(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("production topology: %s (CI never skips this test)", msg)
	}
	t.Skipf("production topology: %s", msg)
}

// prodStack is the topology under test.
type prodStack struct {
	t   *testing.T
	dir string
	// server and moduleDir are the binaries and server module the
	// server runs from (found before anything is built, for the skip).
	server    prodserver.Binaries
	moduleDir string
	pgDSN     string // the role that may create databases
	// srv is the Temporal server on its own databases, the catalogue's
	// among them.
	srv      *prodserver.Server
	frontend string
	bins     string
	mesh     *dsMesh
	cfgPath  string
	cfg      *config.Config
	registry string
	hosts    map[string]string // machine -> URL
	c        client.Client
	workers  []*prodProc
}

// prodProc is one process of the topology, its output kept for failures.
type prodProc struct {
	name   string
	readyz string // a worker's readiness probe
	cmd    *exec.Cmd
	out    *dsBuffer
	done   chan struct{}
	err    error
}

func newProdStack(t *testing.T) *prodStack {
	t.Helper()
	if testing.Short() {
		prodSkip(t, "skipped with -short")
	}
	if os.Getenv(prodSkipEnv) != "" {
		prodSkip(t, "skipped by %s", prodSkipEnv)
	}
	server, err := prodserver.FindBinaries(t.Context())
	if errors.Is(err, prodserver.ErrNotInstalled) {
		prodSkip(t, "%v", err)
	}
	require.NoError(t, err)
	base := os.Getenv(prodPostgresEnv)
	if base == "" {
		prodSkip(t, "%s is not set: as root, export %s=\"$(bash scripts/postgres-test.sh)\"", prodPostgresEnv, prodPostgresEnv)
	}
	_, err = url.Parse(base)
	require.NoError(t, err, "%s is not a URL", prodPostgresEnv)
	cfgPath, err := filepath.Abs(filepath.Join("..", "deploy", "compose-mesh.yaml"))
	require.NoError(t, err)
	p := &prodStack{
		t: t, dir: t.TempDir(), server: server, pgDSN: base,
		mesh: dsScratchMesh(t), cfgPath: cfgPath, hosts: map[string]string{},
	}
	p.cfg0()
	p.moduleDir, err = prodserver.ModuleDir(t.Context())
	require.NoError(t, err)
	p.bins = dsBuild(t, "worker", "host", "starter")
	return p
}

// startTemporal runs temporal-server as the compose file's temporal
// service does (package prodserver: the temporalio/server image's config
// template, deploy/'s dynamic config and the service's environment, only
// the addresses, ports, credentials and database names changed for this
// machine) on fresh databases, Temporal's set up by
// deploy/temporal/setup-schema.sh and the catalogue's beside them, all
// dropped at the end. It waits until the frontend answers health checks.
func (p *prodStack) startTemporal() {
	t := p.t
	root, err := prodserver.FindRoot(".")
	require.NoError(t, err)
	srv, err := prodserver.Start(t.Context(), prodserver.Options{
		Postgres: p.pgDSN, Root: root, ComposeEnv: composeEnv, Binaries: p.server, ModuleDir: p.moduleDir,
		ExtraDatabases: []string{prodCatalogue}, Dir: filepath.Join(p.dir, "server"), Logf: t.Logf,
	})
	require.NoError(t, err, "the production Temporal server on %s", sqlcat.RedactDSN(p.pgDSN))
	p.srv = srv
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("temporal-server (pid %d) output, last lines:\n%s", srv.Pid(), srv.Output(40))
		}
		require.NoError(t, srv.Close(), "stop temporal-server and drop its databases")
	})
	require.Contains(t, srv.SchemaOutput(), "setup-schema: done")
	select {
	case <-srv.Done():
		t.Fatalf("temporal-server exited after it answered (%v):\n%s", srv.ExitErr(), srv.Output(40))
	default:
	}
	p.frontend = srv.Frontend()
}

// registerNamespace runs deploy/temporal/create-namespace.sh with the
// Temporal CLI, the operator's one-time set-up of a new cluster (the
// compose file's temporal-namespace job): prodserver's RegisterNamespace,
// which fails unless the script registers exactly meshroll's search
// attributes and the frontend accepts workflows started with them.
func (p *prodStack) registerNamespace() {
	t := p.t
	// The CLI RegisterNamespace runs the script with (temporalcli.Path).
	if _, err := devserver.CLIPath(); err != nil {
		prodSkip(t, "%v", err)
	}
	require.NoError(t, p.srv.RegisterNamespace(t.Context(), prodNamespace))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := temporalx.Dial(ctx, config.Temporal{Address: p.frontend, Namespace: prodNamespace}, zerolog.Nop(), 30*time.Second)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	p.c = c
}

// startRegistry serves an OCI registry of its own for the builds, as
// registry:2 does in the compose file.
func (p *prodStack) startRegistry() {
	srv, err := registry.New(filepath.Join(p.dir, "registry"))
	require.NoError(p.t, err)
	u, err := srv.Start("127.0.0.1:0")
	require.NoError(p.t, err)
	p.t.Cleanup(func() { _ = srv.Close() })
	p.registry = u
}

// startHost runs the host binary for machine. The noop runtime reports
// each container starting for two seconds, long enough to catch a push in
// flight.
func (p *prodStack) startHost(machine string) {
	t := p.t
	addr := fmt.Sprintf("127.0.0.1:%d", pickPort(t))
	p.hosts[machine] = "http://" + addr
	p.spawn("host "+machine, []string{"MESHROLL_HOST_TOKEN=" + prodToken}, filepath.Join(p.bins, "host"),
		"--machine", machine, "--listen", addr, "--state", filepath.Join(p.dir, "hosts", machine),
		"--runtime", agent.RuntimeNoop, "--noop-start-delay", "2s", "--log-format", "json")
	hc, err := host.NewHTTPClient(p.hosts[machine], prodToken, nil)
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := hc.Report(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s on %s did not answer its report within a minute: %v", machine, addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// env is what an operator sets beside deploy/compose-mesh.yaml to run it
// here: loopback addresses, the catalogue's DSN, the hosts' tokens and the
// scratch repository for the modules.
func (p *prodStack) env(stateDir string) []string {
	env := []string{
		config.EnvConfig + "=" + p.cfgPath,
		"MESHROLL_TEMPORAL_ADDRESS=" + p.frontend,
		"MESHROLL_REGISTRY_ADDRESS=" + p.registry,
		"MESHROLL_CATALOGUE_DSN=" + p.srv.DSN(prodCatalogue),
	}
	if stateDir != "" {
		env = append(env, "MESHROLL_STATE_DIR="+stateDir)
	}
	for _, m := range p.cfg.ModuleNames() {
		env = append(env, "MESHROLL_MODULES_"+prodEnvName(m)+"_REPO="+p.mesh.repo)
	}
	for m, u := range p.hosts {
		env = append(env, "MESHROLL_MACHINES_"+prodEnvName(m)+"_HOST="+u, "MESHROLL_MACHINES_"+prodEnvName(m)+"_TOKEN="+prodToken)
	}
	return append(dsEnv(""), env...)
}

// cfg0 is deploy/compose-mesh.yaml as the file says, before any override.
func (p *prodStack) cfg0() *config.Config {
	if p.cfg == nil {
		cfg, err := config.Load(p.cfgPath)
		require.NoError(p.t, err)
		p.cfg = cfg
	}
	return p.cfg
}

func prodEnvName(name string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// startWorker runs a worker process on the mesh and waits until its
// /readyz answers 200, the probe the compose file's health check asks.
func (p *prodStack) startWorker(name string) *prodProc {
	t := p.t
	probe := fmt.Sprintf("127.0.0.1:%d", pickPort(t))
	env := append(p.env(filepath.Join(p.dir, name)), "MESHROLL_WORKER_METRICS_LISTEN="+probe)
	w := p.spawn(name, env, filepath.Join(p.bins, "worker"), "--log-level", "info", "--log-format", "json")
	w.readyz = "http://" + probe + "/readyz"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status := w.ready()
		if status == http.StatusOK {
			break
		}
		select {
		case <-w.done:
			t.Fatalf("%s exited before it was ready (%v):\n%s", name, w.err, prodserver.Tail(w.out.String(), 30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's %s did not answer 200 within 2 minutes (last: %d):\n%s", name, w.readyz, status, prodserver.Tail(w.out.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Contains(t, w.out.String(), `"message":"worker started"`)
	p.workers = append(p.workers, w)
	return w
}

// ready is the status of the worker's /readyz, 0 when it does not answer.
func (w *prodProc) ready() int {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(w.readyz)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// spawn starts a process whose output is kept, stopped with SIGTERM (then
// SIGKILL) when the test ends, and whose last lines are logged if it fails.
func (p *prodStack) spawn(name string, env []string, bin string, args ...string) *prodProc {
	t := p.t
	proc := &prodProc{name: name, out: &dsBuffer{}, done: make(chan struct{})}
	proc.cmd = exec.Command(bin, args...)
	proc.cmd.Env = env
	if env == nil {
		proc.cmd.Env = dsEnv("")
	}
	proc.cmd.Stdout, proc.cmd.Stderr = proc.out, proc.out
	require.NoError(t, proc.cmd.Start(), "start %s", name)
	go func() { proc.err = proc.cmd.Wait(); close(proc.done) }()
	t.Cleanup(func() {
		stopGently(proc.cmd.Process, proc.done, syscall.SIGTERM)
		if t.Failed() {
			t.Logf("%s (pid %d) output, last lines:\n%s", name, proc.cmd.Process.Pid, prodserver.Tail(proc.out.String(), 40))
		}
	})
	return proc
}

// starter runs the starter binary as an operator would; it must succeed.
func (p *prodStack) starter(args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bins, "starter"), args...)
	cmd.Env = p.env("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(p.t, cmd.Run(), "starter %v:\n%s\n%s", args, stdout.String(), stderr.String())
	return stdout.String()
}

func (p *prodStack) planDigest(id string) string {
	st, err := plans.State(context.Background(), p.c, id)
	require.NoError(p.t, err)
	require.NotNil(p.t, st.Build, "plan %s has no build", id)
	return st.Build.Digest
}

// waitPlan follows the plan until it ends, however it ends.
func (p *prodStack) waitPlan(id string, within time.Duration) meshapi.PlanState {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	st, err := plans.WaitUntil(ctx, p.c, id, "its end", func(st meshapi.PlanState) bool { return st.State.Terminal() }, pollEvery)
	require.NoError(p.t, err)
	return st
}

// waitForPushInFlight waits until a machine workflow has plan id's push
// running on one of the workers, and returns that worker and the machine.
// The worker is known by the identity the activity last ran with, which the
// SDK makes from the process ID ("pid@host@").
func (p *prodStack) waitForPushInFlight(id string, workers ...*prodProc) (*prodProc, string) {
	t := p.t
	deadline := time.Now().Add(4 * time.Minute)
	var seen []string
	for time.Now().Before(deadline) {
		for _, machine := range p.cfg.MachineNames() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			d, err := p.c.DescribeWorkflow(ctx, meshapi.MachineID(machine), "")
			cancel()
			if err != nil {
				continue
			}
			for _, a := range d.RawResponse.GetPendingActivities() {
				if !isPush(a.GetActivityType().GetName()) || a.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
					continue
				}
				identity := a.GetLastWorkerIdentity()
				for _, w := range workers {
					if strings.HasPrefix(identity, strconv.Itoa(w.cmd.Process.Pid)+"@") {
						return w, machine
					}
				}
				if !slices.Contains(seen, identity) {
					seen = append(seen, identity)
				}
			}
		}
		st, err := plans.State(context.Background(), p.c, id)
		if err == nil && st.State.Terminal() {
			t.Fatalf("plan %s ended %s before a push was seen in flight on a worker (identities seen: %v)", id, st.State, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no push of %s was seen in flight on a worker within 4 minutes (identities seen: %v)", id, seen)
	return nil, ""
}

// isPush names the machine workflow's push activity.
func isPush(activityType string) bool {
	return activityType == "PushAndAnswer"
}

// pushRetriedOn returns the attempt on which w ran a Push activity of the
// machine's workflow after an earlier attempt, failing the test if it did
// not. The started event of a retried activity carries the attempt and the
// identity of the worker that ran it.
func (p *prodStack) pushRetriedOn(machine string, w *prodProc) int32 {
	t := p.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	it := p.c.GetWorkflowHistory(ctx, meshapi.MachineID(machine), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]string{} // scheduled event ID -> activity type
	var seen []string
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[e.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && isPush(scheduled[a.GetScheduledEventId()]) {
			seen = append(seen, fmt.Sprintf("attempt %d by %s", a.GetAttempt(), a.GetIdentity()))
			if a.GetAttempt() > 1 && strings.HasPrefix(a.GetIdentity(), strconv.Itoa(w.cmd.Process.Pid)+"@") {
				return a.GetAttempt()
			}
		}
	}
	t.Fatalf("%s's history has no Push retried on %s (pid %d); pushes started: %v", machine, w.name, w.cmd.Process.Pid, seen)
	return 0
}

// running is the digest the machine reports running for module.
func (p *prodStack) running(machine, module string) string {
	hc, err := host.NewHTTPClient(p.hosts[machine], prodToken, nil)
	require.NoError(p.t, err)
	rep, err := hc.Report(context.Background())
	require.NoError(p.t, err)
	c, ok := rep.Running(module)
	require.True(p.t, ok, "%s runs no %s", machine, module)
	require.Equal(p.t, mesh.StateRunning, c.State, "%s's %s", machine, module)
	return c.Digest
}

// checkJournal reads a host's whole journal and asserts that every
// sequence was applied once and in order, that no container's generation
// went down, and that each plan's declaration was applied exactly once. It
// returns how many repeats (a retried push acknowledged without applying)
// the host journalled.
func (p *prodStack) checkJournal(machine string, planIDs ...string) (repeats int) {
	t := p.t
	hc, err := host.NewHTTPClient(p.hosts[machine], prodToken, nil)
	require.NoError(t, err)
	var entries []host.JournalEntry
	for before := uint64(0); ; {
		page, err := hc.Journal(context.Background(), before, 0)
		require.NoError(t, err)
		entries = append(entries, page.Entries...)
		if page.NextBefore == 0 {
			break
		}
		before = page.NextBefore
	}
	slices.Reverse(entries) // oldest first
	var last uint64
	high := map[string]int64{}
	applied := map[string]int{}
	for _, e := range entries {
		switch e.Outcome {
		case agent.OutcomeRepeat:
			repeats++
		case agent.OutcomeApplied:
			require.Greater(t, e.Seq, last, "%s: journal entry %d applies sequence %d after %d", machine, e.Index, e.Seq, last)
			last = e.Seq
			applied[e.Plan]++
			for _, c := range e.Containers {
				require.GreaterOrEqual(t, c.Generation, high[c.Module], "%s: journal entry %d lowers %s to generation %d from %d", machine, e.Index, c.Module, c.Generation, high[c.Module])
				high[c.Module] = c.Generation
			}
		}
	}
	for _, id := range planIDs {
		require.Equal(t, 1, applied[id], "%s applied %s's declaration %d times (journal: %d entries)", machine, id, applied[id], len(entries))
	}
	return repeats
}

// checkCatalogue asserts the PostgreSQL catalogue holds n builds of host,
// with rising generations: both workers recorded into the one catalogue.
func (p *prodStack) checkCatalogue(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sqlcat.Open(ctx, p.srv.DSN(prodCatalogue))
	require.NoError(p.t, err)
	defer func() { _ = c.Close() }()
	builds, err := c.Builds(ctx, "host", 0)
	require.NoError(p.t, err)
	require.Len(p.t, builds, n, "builds of host in the PostgreSQL catalogue")
	for i := 1; i < len(builds); i++ {
		require.NotEqual(p.t, builds[i-1].Build.Generation, builds[i].Build.Generation)
	}
}

// serverCounter sums a counter of the server's Prometheus endpoint over
// its label sets.
func (p *prodStack) serverCounter(name string) float64 {
	p.t.Helper()
	resp, err := http.Get(p.srv.MetricsURL())
	require.NoError(p.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(p.t, err, line)
		sum += v
	}
	return sum
}
