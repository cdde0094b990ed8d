package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/temporalx"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// Environment variables that turn the bench binary (or its test binary)
// into a worker process: the footprint scenario measures a worker whose
// RSS and CPU are its own.
const (
	// EnvWorker names the mesh config the worker process serves.
	EnvWorker = "MESHROLL_BENCH_WORKER"
	// EnvPprof names a directory for the worker process's CPU and heap
	// profiles.
	EnvPprof = "MESHROLL_BENCH_PPROF"
)

// readyLine is what a worker process prints once it polls.
const readyLine = "meshroll-bench-worker ready"

// ChildRequested reports whether this process was started as one of the
// bench's child processes: a worker process, or an agents process.
func ChildRequested() bool { return os.Getenv(EnvWorker) != "" || os.Getenv(EnvAgents) != "" }

// RunChild is a child process's whole life (runWorkerProcess,
// runAgentsProcess).
func RunChild() error {
	if os.Getenv(EnvAgents) != "" {
		return runAgentsProcess()
	}
	return runWorkerProcess()
}

// runWorkerProcess is the worker process's whole life: the real worker
// (workerapp.New) over the mesh config named by EnvWorker, with a memory
// catalogue and the git-digest builder, until SIGTERM or stdin closes.
func runWorkerProcess() error {
	path := os.Getenv(EnvWorker)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("bench worker: %w", err)
	}
	cfg, err := config.Parse(path, data)
	if err != nil {
		return fmt.Errorf("bench worker: %w", err)
	}
	if dir := os.Getenv(EnvPprof); dir != "" {
		f, err := os.Create(filepath.Join(dir, "worker-cpu.pprof"))
		if err != nil {
			return fmt.Errorf("bench worker: cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench worker: cpu profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
			if hf, err := os.Create(filepath.Join(dir, "worker-heap.pprof")); err == nil {
				runtime.GC()
				_ = pprof.WriteHeapProfile(hf)
				_ = hf.Close()
			}
		}()
	}
	log, err := logging.New(os.Stderr, "warn", logging.FormatJSON)
	if err != nil {
		return err
	}
	co, err := temporalx.Options(cfg.Temporal, log.With().Str("component", "sdk").Logger())
	if err != nil {
		return err
	}
	c, err := client.Dial(co)
	if err != nil {
		return fmt.Errorf("bench worker: dial: %w", err)
	}
	defer c.Close()
	deps := workerapp.Deps{Catalogue: catalogue.NewMemory(), Builder: build.GitDigest{}, Hosts: &config.Hosts{Mesh: cfg}, PollInterval: PollInterval}
	w := workerapp.New(c, cfg, filepath.Dir(path), deps, log)
	if err := w.Start(); err != nil {
		return fmt.Errorf("bench worker: %w", err)
	}
	fmt.Println(readyLine)
	untilStopped()
	w.Stop()
	return nil
}

// untilStopped waits for a child's end: SIGTERM, an interrupt, or its
// stdin closing, which is the bench going.
func untilStopped() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString(0) // EOF when the bench goes
		stop()
	}()
	<-ctx.Done()
}

// WorkerProcess is a worker running as a child process of the bench.
type WorkerProcess struct{ *child }

// StartWorkerProcess re-executes this binary as a worker process for the
// mesh and waits until it polls. pprofDir, when set, receives its profiles.
func (m *Mesh) StartWorkerProcess(ctx context.Context, pprofDir string) (*WorkerProcess, error) {
	if err := workerapp.EnsureSearchAttributes(ctx, m.srv.Client(), m.srv.Namespace, m.log); err != nil {
		return nil, err
	}
	c, err := startChild(ctx, "bench worker process", filepath.Join(m.dir, "worker.log"),
		[]string{EnvWorker + "=" + m.ConfigPath, EnvPprof + "=" + pprofDir}, nil)
	if err != nil {
		return nil, err
	}
	return &WorkerProcess{c}, nil
}

// child is this binary re-executed for one part of the bench (a worker, a
// set of agents): it prints readyLine once it serves, and ends on SIGTERM
// or when its stdin closes, which is when the bench goes.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  *os.File
	// stdin is held open for the process's life: its end tells the child
	// that the bench is gone.
	stdin io.WriteCloser

	stopOnce sync.Once
	stopErr  error
}

// startChild starts this binary with env added, its stderr in logPath,
// hands each line it prints before readyLine to line (nil: none
// expected), and waits for readyLine.
func startChild(ctx context.Context, name, logPath string, env []string, line func(string) error) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan error, 1), log: logf, stdin: stdin}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			switch text := strings.TrimSpace(sc.Text()); {
			case signalled:
			case text == readyLine:
				ready <- nil
				signalled = true
			case line != nil:
				if err := line(text); err != nil {
					ready <- err
					signalled = true
				}
			}
		}
		c.done <- cmd.Wait()
	}()
	fail := func(err error) (*child, error) {
		_ = cmd.Process.Kill()
		_ = logf.Close()
		return nil, err
	}
	select {
	case err := <-ready:
		if err != nil {
			return fail(fmt.Errorf("%s: %w; its log: %s", name, err, logf.Name()))
		}
		return c, nil
	case err := <-c.done:
		_ = logf.Close()
		return nil, fmt.Errorf("%s exited before it served (%v); its log: %s", name, err, logf.Name())
	case <-time.After(time.Minute):
		return fail(fmt.Errorf("%s did not serve within a minute; its log: %s", name, logf.Name()))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

// Pid is the child's process id.
func (p *child) Pid() int { return p.cmd.Process.Pid }

// Usage is a process's peak resident set and CPU time so far.
type Usage struct {
	PeakRSSBytes int64
	CPU          time.Duration
}

// ReadUsage reads VmHWM from /proc/<pid>/status and utime+stime from
// /proc/<pid>/stat (in USER_HZ, which Linux fixes at 100 for /proc).
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read usage: %w", err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return u, fmt.Errorf("read usage: VmHWM: %w", err)
				}
				u.PeakRSSBytes = kb << 10
			}
		}
	}
	f, err := readStat(pid)
	if err != nil {
		return u, err
	}
	u.CPU = f.ticks(statUtime, statStime)
	return u, nil
}

// ReadTreeCPU is the CPU time so far of pid and of its children, those
// running and those it has reaped: what a server made of processes costs,
// such as PostgreSQL's postmaster and its backends.
func ReadTreeCPU(pid int) (time.Duration, error) {
	f, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	cpu := f.ticks(statUtime, statStime, statCutime, statCstime)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("read usage: %w", err)
	}
	want := strconv.Itoa(pid)
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		cf, err := readStat(child)
		if err != nil || len(cf) <= statPpid || cf[statPpid] != want {
			continue // gone since the listing, or not pid's
		}
		cpu += cf.ticks(statUtime, statStime)
	}
	return cpu, nil
}

// statFields are /proc/<pid>/stat's fields after the command name, which
// is in parentheses and may hold spaces: index 0 is field 3 (state).
type statFields []string

// Indexes into statFields of the fields read: man 5 proc's numbers less 3.
const (
	statPpid   = 1
	statUtime  = 11
	statStime  = 12
	statCutime = 13
	statCstime = 14
)

func readStat(pid int) (statFields, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, fmt.Errorf("read usage: %w", err)
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("read usage: malformed stat")
	}
	f := statFields(strings.Fields(s[i+1:]))
	if len(f) <= statCstime {
		return nil, errors.New("read usage: short stat")
	}
	return f, nil
}

// ticks sums the fields at idx, clock ticks in USER_HZ, which Linux fixes
// at 100 for /proc; a field that does not parse counts 0.
func (f statFields) ticks(idx ...int) time.Duration {
	var n int64
	for _, i := range idx {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		n += v
	}
	return time.Duration(n) * (time.Second / 100)
}

// Stop ends the child (SIGTERM; a worker stops its worker and writes its
// profiles) and waits for it. Later calls return the first's answer.
func (p *child) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *child) stop() error {
	defer func() { _ = p.log.Close(); _ = p.stdin.Close() }()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("%s did not stop within a minute of SIGTERM", p.name)
	}
}
