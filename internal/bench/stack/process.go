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

// WorkerProcessRequested reports whether this process was started as a
// bench worker process.
func WorkerProcessRequested() bool { return os.Getenv(EnvWorker) != "" }

// RunWorkerProcess is the worker process's whole life: the real worker
// (workerapp.New) over the mesh config named by EnvWorker, with a memory
// catalogue and the git-digest builder, until SIGTERM or stdin closes.
func RunWorkerProcess() error {
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString(0) // EOF when the bench goes
		stop()
	}()
	<-ctx.Done()
	w.Stop()
	return nil
}

// WorkerProcess is a worker running as a child process of the bench.
type WorkerProcess struct {
	cmd  *exec.Cmd
	done chan error
	log  *os.File
	// stdin is held open for the process's life: its end tells the worker
	// process that the bench is gone.
	stdin io.WriteCloser

	stopOnce sync.Once
	stopErr  error
}

// StartWorkerProcess re-executes this binary as a worker process for the
// mesh and waits until it polls. pprofDir, when set, receives its profiles.
func (m *Mesh) StartWorkerProcess(ctx context.Context, pprofDir string) (*WorkerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench worker process: %w", err)
	}
	if err := workerapp.EnsureSearchAttributes(ctx, m.srv.Client(), "default", m.log); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(m.dir, "worker.log"))
	if err != nil {
		return nil, fmt.Errorf("bench worker process: %w", err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), EnvWorker+"="+m.ConfigPath, EnvPprof+"="+pprofDir)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("bench worker process: %w", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("bench worker process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("bench worker process: %w", err)
	}
	p := &WorkerProcess{cmd: cmd, done: make(chan error, 1), log: logf, stdin: stdin}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.TrimSpace(sc.Text()) == readyLine {
				close(ready)
				signalled = true
			}
		}
		p.done <- cmd.Wait()
	}()
	select {
	case <-ready:
		return p, nil
	case err := <-p.done:
		_ = logf.Close()
		return nil, fmt.Errorf("bench worker process exited before it polled (%v); its log: %s", err, logf.Name())
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("bench worker process did not poll within a minute; its log: %s", logf.Name())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	}
}

// Pid is the worker process's id.
func (p *WorkerProcess) Pid() int { return p.cmd.Process.Pid }

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
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("read usage: %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u, errors.New("read usage: malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return u, errors.New("read usage: short stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	stt, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("read usage: %w", err)
	}
	u.CPU = time.Duration(ut+stt) * (time.Second / 100)
	return u, nil
}

// Stop ends the worker process (SIGTERM; it stops its worker and writes
// its profiles) and waits for it. Later calls return the first's answer.
func (p *WorkerProcess) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *WorkerProcess) stop() error {
	defer func() { _ = p.log.Close(); _ = p.stdin.Close() }()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return fmt.Errorf("bench worker process: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		return errors.New("bench worker process did not stop within a minute of SIGTERM")
	}
}
