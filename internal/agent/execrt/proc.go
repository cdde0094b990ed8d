package execrt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// defaultPath is searched for an entrypoint named without a slash when the
// image sets no PATH, as Docker does.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// proc is one run of a container's process.
type proc struct {
	cmd     *exec.Cmd
	pid     int
	log     *os.File
	started time.Time
	exited  chan struct{} // closed once the process is reaped
}

// start starts one run of ct's process: the image's Entrypoint followed by
// the declared Args, or the image's Cmd when none are declared, resolved
// inside the rootfs, in the image's working directory, with the image's
// environment, the declared one over it and mesh.RuntimeEnv (the machine,
// module and digest) over both. Nothing of the agent's own environment is
// passed on: it may hold the registry password. The process gets its own
// process group, so that stopping it reaches whatever it started.
func (r *Runtime) start(ct *container, img *image, logPath string) (*proc, error) {
	spec, cfg := ct.spec, img.config
	args := spec.Args
	if len(args) == 0 {
		args = cfg.Cmd
	}
	argv := append(slices.Clone(cfg.Entrypoint), args...)
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("image %s@%s names no Entrypoint or Cmd and none is declared: %w", spec.Image, spec.Digest, ErrBadImage)
	}
	inv, err := resolve(r.o.Machine, spec, img, argv)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	logLine(logf, "starting %s %s: %s", spec.Module, spec.Digest, quoteArgs(argv))
	cmd, err := startRetryingBusy(func() *exec.Cmd { return inv.command(context.Background(), logf) })
	if err != nil {
		logLine(logf, "could not start %s: %v", spec.Module, err)
		_ = logf.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, log: logf, started: time.Now(), exited: make(chan struct{})}
	logLine(logf, "started pid %d", p.pid)
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exec runs argv beside module's process, as that process runs (resolved
// inside the rootfs, in the image's working directory, with the same
// environment; see start), and waits for it, writing its output to out:
// what an exec health probe needs. The command has a process group of its
// own, killed whole when it exits or ctx ends. A command that ran returns
// its exit code (-1 when a signal ended it) and no error; one that could
// not start, or outlived ctx, returns an error saying so.
func (r *Runtime) Exec(ctx context.Context, module string, argv []string, out io.Writer) (int, error) {
	r.mu.Lock()
	ct := r.current[module]
	var img *image
	if ct != nil {
		img = ct.img
	}
	r.mu.Unlock()
	if img == nil {
		return 0, fmt.Errorf("runtime exec: container %s has no process to run a command beside", module)
	}
	if len(argv) == 0 || argv[0] == "" {
		return 0, errors.New("runtime exec: no command")
	}
	inv, err := resolve(r.o.Machine, ct.spec, img, argv)
	if err != nil {
		return 0, err
	}
	cmd, err := startRetryingBusy(func() *exec.Cmd {
		cmd := inv.command(ctx, out)
		cmd.Cancel = func() error {
			signalGroup(cmd.Process.Pid, sigKill)
			return nil
		}
		// Whatever it started and left holding its output does not keep
		// the probe waiting.
		cmd.WaitDelay = time.Second
		return cmd
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	err = cmd.Wait()
	signalGroup(cmd.Process.Pid, sigKill)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return 0, fmt.Errorf("%s did not finish in time: %w", argv[0], ctx.Err())
	case errors.As(err, &exit):
		return exit.ExitCode(), nil
	case err != nil:
		return 0, fmt.Errorf("run %s: %w", argv[0], err)
	}
	return 0, nil
}

// invocation is a program of an image resolved to run on the host: what a
// container's process and a command run beside it share.
type invocation struct {
	path string   // the program, on the host
	args []string // its arguments after argv[0]
	dir  string   // the working directory, on the host
	env  []string
}

// resolve finds argv's program inside img's rootfs for spec's container
// on machine (see start for the rules).
func resolve(machine string, spec mesh.Container, img *image, argv []string) (invocation, error) {
	cfg := img.config
	env := environ(cfg.Env, spec, mesh.RuntimeEnv(machine, spec))
	root, err := os.OpenRoot(img.rootfs)
	if err != nil {
		return invocation{}, fmt.Errorf("open rootfs: %w", err)
	}
	defer root.Close()
	wd, err := workDir(root, cfg.WorkingDir)
	if err != nil {
		return invocation{}, err
	}
	exe, err := lookPath(root, argv[0], wd, env)
	if err != nil {
		return invocation{}, err
	}
	return invocation{
		path: filepath.Join(img.rootfs, filepath.FromSlash(exe)),
		args: argv[1:],
		dir:  filepath.Join(img.rootfs, filepath.FromSlash(wd)),
		env:  env,
	}, nil
}

// command is the invocation as a command writing to out, in a process
// group of its own.
func (inv invocation) command(ctx context.Context, out io.Writer) *exec.Cmd {
	cmd := exec.CommandContext(ctx, inv.path, inv.args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = inv.dir, inv.env, out, out, sysProcAttr()
	return cmd
}

// stop ends a running process: SIGTERM to its group, SIGKILL once grace
// is over (or Close ran out of time), and waits until it is reaped.
func (r *Runtime) stop(p *proc, grace time.Duration) {
	logLine(p.log, "stopping pid %d: SIGTERM, SIGKILL after %s", p.pid, grace)
	signalGroup(p.pid, sigTerm)
	t := time.NewTimer(grace)
	defer t.Stop()
	killed := false
	select {
	case <-p.exited:
	case <-t.C:
		killed = true
	case <-r.killNow:
		killed = true
	}
	if killed {
		logLine(p.log, "pid %d did not stop: SIGKILL", p.pid)
		signalGroup(p.pid, sigKill)
		<-p.exited
	}
	p.finish(fmt.Sprintf("stopped: %s after %s", p.exitReason(), time.Since(p.started).Round(time.Millisecond)))
}

// finish kills what the process left behind in its group, notes the exit
// in the log and closes it.
func (p *proc) finish(why string) {
	signalGroup(p.pid, sigKill)
	logLine(p.log, "pid %d exited: %s", p.pid, why)
	_ = p.log.Close()
}

// exitReason names the exit code or the signal; only valid once exited.
func (p *proc) exitReason() string { return exitReason(p.cmd.ProcessState) }

// environ is the process's environment, in a stable order: the image's, the
// declared one over it, and the runtime's own variables over both.
func environ(image []string, spec mesh.Container, runtime map[string]string) []string {
	var keys []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	for _, kv := range image {
		if k, v, _ := strings.Cut(kv, "="); k != "" {
			set(k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		set(k, spec.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(runtime)) {
		set(k, runtime[k])
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + vals[k]
	}
	return out
}

// inRoot turns an image path (absolute, or relative to the image's root)
// into a name for os.Root; ".." cannot climb above the root.
func inRoot(p string) string {
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if rel == "" {
		return "."
	}
	return rel
}

// workDir is the image's working directory inside the root, made if the
// image names one it lacks (as Docker does).
func workDir(root *os.Root, dir string) (string, error) {
	wd := inRoot(dir)
	fi, err := root.Stat(wd)
	if os.IsNotExist(err) {
		if err := root.MkdirAll(wd, 0o755); err != nil {
			return "", fmt.Errorf("working directory %s: %w", dir, unsafeIfEscape(err))
		}
		return wd, nil
	}
	if err != nil {
		return "", fmt.Errorf("working directory %s: %w", dir, orBad(unsafeIfEscape(err)))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("working directory %s is not a directory: %w", dir, ErrBadImage)
	}
	return wd, nil
}

// lookPath finds the program inside the root: a name with a slash relative
// to the working directory, one without on the PATH the process gets. The
// file is checked through os.Root, which follows symlinks only while they
// stay inside the root, so that the kernel, resolving the same path when it
// executes it, cannot end up outside the image.
func lookPath(root *os.Root, prog, wd string, env []string) (string, error) {
	var cands []string
	if strings.Contains(prog, "/") {
		p := prog
		if !path.IsAbs(p) {
			p = path.Join("/", wd, p)
		}
		cands = []string{inRoot(p)}
	} else {
		search := defaultPath
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				search = v
			}
		}
		for _, d := range strings.Split(search, ":") {
			if path.IsAbs(d) {
				cands = append(cands, inRoot(path.Join(d, prog)))
			}
		}
	}
	var firstErr error
	for _, c := range cands {
		fi, err := root.Stat(c)
		switch {
		case err != nil:
			if !os.IsNotExist(err) && firstErr == nil {
				firstErr = fmt.Errorf("program %s: %w", prog, orBad(unsafeIfEscape(err)))
			}
		case !fi.Mode().IsRegular():
			if firstErr == nil {
				firstErr = fmt.Errorf("program %s is not a regular file: %w", "/"+c, ErrBadImage)
			}
		case fi.Mode()&0o111 == 0:
			if firstErr == nil {
				firstErr = fmt.Errorf("program %s is not executable: %w", "/"+c, ErrBadImage)
			}
		default:
			return c, nil
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("program %s is not in the image: %w", prog, ErrBadImage)
}

// orBad marks err ErrBadImage unless it is already permanent.
func orBad(err error) error {
	if permanent(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBadImage, err)
}

func logLine(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s meshroll exec: %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

func quoteArgs(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}

// startRetryingBusy starts a command made by newCmd, trying again for a
// moment when the kernel says the executable is busy: another child forked
// by this agent (another container starting) can hold the freshly unpacked
// binary open until it execs (golang.org/issue/22315). That is not the
// container failing, so it must not count towards crash-looping.
func startRetryingBusy(newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	for attempt := 0; ; attempt++ {
		cmd := newCmd()
		err := cmd.Start()
		if !errors.Is(err, syscall.ETXTBSY) || attempt >= 20 {
			return cmd, err
		}
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
}
